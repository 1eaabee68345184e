"""CirrusMQ on Spark: the ``cirrusmq`` PySpark data source and the data pipeline jobs.

``register(spark)`` makes ``spark.read.format("cirrusmq")`` and
``spark.readStream.format("cirrusmq")`` available; see docs/spark.md. Needs the ``[spark]``
extra (pyspark, boto3, pyarrow). ``options_from_profile("local")`` gives the data source's
options for the stack ``cirrusmq dev`` runs.
"""

from __future__ import annotations

import os
from typing import Any

FORMAT = "cirrusmq"


def register(spark: Any) -> None:
    """Register the ``cirrusmq`` data source with ``spark`` (a SparkSession)."""
    from .source import CirrusMQDataSource

    spark.dataSource.register(CirrusMQDataSource)


def options_from_profile(
    profile: str = "local", *, config_path: str | os.PathLike[str] | None = None
) -> dict[str, str]:
    """The data source options stored with ``profile`` in ``~/.cirrusmq/config`` (or
    ``$CIRRUSMQ_CONFIG``): ``cirrusmq dev`` writes them for its stack as ``local`` (bucket,
    tables, the moto endpoint and keys), so
    ``spark.read.format("cirrusmq").options(**options_from_profile("local"))`` reads it.
    ``cirrusmq.config.ConfigError`` when the profile has none."""
    from ..config import load_spark_options

    return load_spark_options(profile, config_path=config_path)


__all__ = ["FORMAT", "options_from_profile", "register"]
