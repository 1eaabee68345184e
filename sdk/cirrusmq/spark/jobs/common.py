"""What the jobs share: a SparkSession, data source options, a Hadoop file system helper."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..options import get

OPTIONS_ENV = "CIRRUSMQ_SPARK_OPTIONS"
"""A JSON object of data source options (e.g. ``LocalStack.spark_options()``)."""


def session(app: str, master: str | None = None) -> Any:
    """The active SparkSession, else a new one (workers run this Python), with the
    ``cirrusmq`` data source registered."""
    from pyspark.sql import SparkSession

    from .. import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app).config("spark.sql.session.timeZone", "UTC")
    if master:
        builder = builder.master(master)
    spark = builder.getOrCreate()
    register(spark)
    return spark


def load_options(pairs: Iterable[str] = (), options_file: str | None = None) -> dict[str, str]:
    """Data source options from ``$CIRRUSMQ_SPARK_OPTIONS`` (JSON), then ``options_file``
    (JSON), then ``KEY=VALUE`` pairs, later ones winning."""
    options: dict[str, str] = {}
    if os.environ.get(OPTIONS_ENV):
        options.update(_strings(json.loads(os.environ[OPTIONS_ENV])))
    if options_file:
        options.update(_strings(json.loads(Path(options_file).read_text())))
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"an option is KEY=VALUE, not {pair!r}")
        options[key.strip()] = value
    return options


def add_option_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a cirrusmq data source option (also ${OPTIONS_ENV} as JSON)",
    )
    parser.add_argument("--options-file", help="a JSON object of data source options")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local)")


def reader(spark: Any, options: Mapping[str, str], topic: str, **extra: str | None) -> Any:
    """A batch DataFrame of ``topic`` through the data source."""
    frame = spark.read.format("cirrusmq").options(**options).option("topic", topic)
    for key, value in extra.items():
        if value is not None and get(options, key) is None:
            frame = frame.option(key, value)
    return frame.load()


def _strings(data: Any) -> dict[str, str]:
    if not isinstance(data, dict):
        raise ValueError("data source options must be a JSON object")
    return {str(k): str(v) for k, v in data.items()}


class HadoopFS:
    """Files through Hadoop's FileSystem (local paths, HDFS, s3a:// alike), on the driver."""

    def __init__(self, spark: Any, root: str) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()
        self.root = root.rstrip("/")
        self._fs = self.path(self.root).getFileSystem(self._conf)
        self._fs.setVerifyChecksum(False)  # a manifest edited by hand has a stale .crc

    def path(self, text: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(text)

    def exists(self, text: str) -> bool:
        return bool(self._fs.exists(self.path(text)))

    def read_text(self, text: str) -> str | None:
        if not self.exists(text):
            return None
        stream = self._fs.open(self.path(text))
        try:
            return str(self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, text: str, content: str) -> None:
        """Write ``content`` to ``text`` through a temporary file renamed into place."""
        temporary = f"{text}.tmp"
        stream = self._fs.create(self.path(temporary), True)
        try:
            stream.write(bytearray(content.encode()))
        finally:
            stream.close()
        self._fs.delete(self.path(text), False)
        self._fs.rename(self.path(temporary), self.path(text))

    def files(self, text: str, suffix: str = "") -> list[str]:
        """Every file under ``text`` (recursively) whose name ends with ``suffix``."""
        if not self.exists(text):
            return []
        found, it = [], self._fs.listFiles(self.path(text), True)
        while it.hasNext():
            name = str(it.next().getPath().toString())
            if name.endswith(suffix):
                found.append(name)
        return sorted(found)

    def rename(self, source: str, target: str) -> None:
        self._fs.mkdirs(self.path(target).getParent())
        self._fs.delete(self.path(target), False)
        if not self._fs.rename(self.path(source), self.path(target)):
            raise OSError(f"could not move {source} to {target}")

    def delete(self, text: str) -> None:
        self._fs.delete(self.path(text), True)

    def qualified(self, text: str) -> str:
        """``text`` as the file system names it (``file:/...`` for a local path)."""
        return str(self._fs.makeQualified(self.path(text)).toString())


def arguments(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    return parser.parse_args(argv)
