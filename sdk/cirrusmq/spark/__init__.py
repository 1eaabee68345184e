"""CirrusMQ on Spark: the ``cirrusmq`` PySpark data source and the data pipeline jobs.

``register(spark)`` makes ``spark.read.format("cirrusmq")`` and
``spark.readStream.format("cirrusmq")`` available; see docs/spark.md. Needs the ``[spark]``
extra (pyspark, boto3, pyarrow).
"""

from __future__ import annotations

from typing import Any

FORMAT = "cirrusmq"


def register(spark: Any) -> None:
    """Register the ``cirrusmq`` data source with ``spark`` (a SparkSession)."""
    from .source import CirrusMQDataSource

    spark.dataSource.register(CirrusMQDataSource)


__all__ = ["FORMAT", "register"]
