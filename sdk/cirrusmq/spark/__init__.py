"""CirrusMQ on Spark: the ``cirrusmq`` PySpark data source and the data pipeline jobs.

``register(spark)`` makes ``spark.read.format("cirrusmq")`` and
``spark.readStream.format("cirrusmq")`` available; see docs/spark.md. Needs the ``[spark]``
extra (pyspark, boto3, pyarrow). ``options_from_profile("local")`` gives the data source's
options for the stack ``cirrusmq dev`` runs.
"""

from __future__ import annotations

import os
import re
from typing import Any

FORMAT = "cirrusmq"


def register(spark: Any) -> None:
    """Register the ``cirrusmq`` data source with ``spark`` (a SparkSession). A read is
    split over at least the session's default parallelism (option ``minPartitions``;
    without it, the cores of the machine that plans the read)."""
    from .source import with_defaults

    parallelism = _default_parallelism(spark)
    defaults = {"minPartitions": str(parallelism)} if parallelism else {}
    spark.dataSource.register(with_defaults(defaults))


def _default_parallelism(spark: Any) -> int | None:
    """The cores Spark splits work over, as its file sources take them: the SparkContext's
    default parallelism; in a Spark Connect session (no SparkContext) the configured
    ``spark.default.parallelism``, or the cores of a ``local[N]`` master. None: unknown."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        pass
    configured = _conf(spark, "spark.default.parallelism")
    if configured:
        return int(configured)
    master = _conf(spark, "spark.master") or ""
    local = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]", master.strip())
    if local:
        return os.cpu_count() if local[1] == "*" else int(local[1])
    return 1 if master.strip() == "local" else None


def _conf(spark: Any, name: str) -> str | None:
    try:
        return spark.conf.get(name, None)
    except Exception:  # noqa: BLE001 - a setting Spark Connect will not show
        return None


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
