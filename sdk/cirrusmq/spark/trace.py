"""Message trace events in Spark: ``spark.read.format("cirrusmq").option("trace", "true")``.

The broker writes one Parquet object per request that touched traced topics, under
``trace/dt=<yyyy-mm-dd>/hour=<hh>/<request ulid>.<topic digests>.parquet`` (the digests: the
first 8 hex digits of the SHA-256 of each topic name; ``all`` for more than 8 topics). This
reader lists that prefix (from ``startingTimestamp``'s hour to ``endingTimestamp``'s, when
given), skips by name the objects of other topics when ``topic`` is given, and reads the
objects on the executors, a bounded number per task. Batch reads only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from .options import DEFAULT_OBJECTS_PER_PARTITION, OptionError, StackOptions, get

TRACE_PREFIX = "trace/"
TRACE_SCHEMA_DDL = (
    "time TIMESTAMP, kind STRING, topic STRING, message_id STRING, queue INT, offset BIGINT, "
    "lease_topic STRING, `group` STRING, client_id STRING, producer_id STRING, attempt INT, "
    "invisible_until TIMESTAMP, delivery_timestamp TIMESTAMP, born_timestamp TIMESTAMP, "
    "target_topic STRING, reason STRING, transaction_id STRING"
)
"""The columns of a trace read (Spark DDL), in order: those of the objects."""
COLUMNS = tuple(
    [
        "time",
        "kind",
        "topic",
        "message_id",
        "queue",
        "offset",
        "lease_topic",
        "group",
        "client_id",
        "producer_id",
        "attempt",
        "invisible_until",
        "delivery_timestamp",
        "born_timestamp",
        "target_topic",
        "reason",
        "transaction_id",
    ]
)


def wants_trace(options: Mapping[str, str]) -> bool:
    """Whether the options ask for trace events (``trace`` = ``true``)."""
    value = (get(options, "trace") or "false").strip().lower()
    if value not in ("true", "false"):
        raise OptionError("trace must be true or false")
    return value == "true"


def topic_digest(topic: str) -> str:
    return hashlib.sha256(topic.encode()).hexdigest()[:8]


def hour_prefix(time_ms: int) -> str:
    at = dt.datetime.fromtimestamp(time_ms / 1000, tz=dt.UTC)
    return f"{TRACE_PREFIX}dt={at:%Y-%m-%d}/hour={at:%H}/"


def may_concern(key: str, topic: str) -> bool:
    tail = key.rsplit("/", 1)[-1].split(".")
    return len(tail) < 3 or tail[1] == "all" or topic_digest(topic) in tail[1].split("_")


@dataclass(frozen=True)
class TraceQuery:
    topic: str | None
    starting_ms: int | None
    ending_ms: int | None
    objects_per_partition: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> TraceQuery:
        def number(name: str) -> int | None:
            text = get(options, name)
            if text is None or text == "":
                return None
            try:
                return int(text)
            except ValueError as exc:
                raise OptionError(f"{name} must be an integer") from exc

        per = number("objectsPerPartition") or DEFAULT_OBJECTS_PER_PARTITION
        if per < 1:
            raise OptionError("objectsPerPartition must be at least 1")
        return cls(
            topic=get(options, "topic") or None,
            starting_ms=number("startingTimestamp"),
            ending_ms=number("endingTimestamp"),
            objects_per_partition=per,
        )


@dataclass
class TraceObjects(InputPartition):
    """One Spark task: a bounded group of trace objects."""

    keys: list[str]


class TraceBatchReader(DataSourceReader):
    """Lists the trace objects on the driver; executors read and filter them."""

    def __init__(self, stack: StackOptions, query: TraceQuery) -> None:
        self.stack, self.query = stack, query

    def partitions(self) -> list[InputPartition]:
        keys = [
            k for k in self._keys() if self.query.topic is None or may_concern(k, self.query.topic)
        ]
        per = self.query.objects_per_partition
        return [TraceObjects(keys[i : i + per]) for i in range(0, len(keys), per)]

    def _keys(self) -> Iterator[str]:
        client = self.stack.client("s3")
        request: dict[str, Any] = {"Bucket": self.stack.bucket, "Prefix": TRACE_PREFIX}
        if self.query.starting_ms is not None:
            request["StartAfter"] = hour_prefix(self.query.starting_ms)
        last = hour_prefix(self.query.ending_ms) if self.query.ending_ms is not None else None
        for page in client.get_paginator("list_objects_v2").paginate(**request):
            for entry in page.get("Contents", []):
                key = entry["Key"]
                if last is not None and key[: len(last)] > last:
                    return
                if key.endswith(".parquet"):
                    yield key

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        if not isinstance(partition, TraceObjects):
            return iter(())
        return read_trace_objects(self.stack, self.query, partition.keys)


def read_trace_objects(
    stack: StackOptions, query: TraceQuery, keys: list[str]
) -> Iterator[tuple[Any, ...]]:
    """The events of ``keys`` (objects expired since planning are skipped), as rows."""
    import pyarrow.parquet as pq

    client = stack.client("s3")
    for key in keys:
        try:
            data = client.get_object(Bucket=stack.bucket, Key=key)["Body"].read()
        except client.exceptions.NoSuchKey:
            continue
        for row in pq.read_table(io.BytesIO(data)).to_pylist():
            if query.topic is not None and row.get("topic") != query.topic:
                continue
            time_ms = int(row["time"].timestamp() * 1000)
            if query.starting_ms is not None and time_ms < query.starting_ms:
                continue
            if query.ending_ms is not None and time_ms > query.ending_ms:
                continue
            yield tuple(row.get(name) for name in COLUMNS)
