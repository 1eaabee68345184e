"""Message trace objects (S3): one Parquet object per request that touched traced topics.

Layout (Hive-style, so Spark, Athena and DuckDB read it like the topics)::

    trace/dt=<yyyy-mm-dd>/hour=<hh>/<request ulid>.<topic digests>.parquet

``dt`` / ``hour`` are the request's time (UTC); the file name carries, after the request's
ULID (time-ordered), an 8-hex digest of each traced topic the object holds events of
(joined by ``_``; ``all`` past :data:`MAX_NAMED_TOPICS`), so a lookup skips the objects
of other topics from the listing alone, without reading them. Objects are tagged with the
retention tier of the longest-kept topic they concern (the bucket's lifecycle expires them).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlencode

import pyarrow as pa
import pyarrow.parquet as pq
from ulid import ULID

from .batch_objects import RETENTION_TAG, retention_tier_days

TRACE_PREFIX = "trace/"
SCHEMA_VERSION = "1"
MAX_NAMED_TOPICS = 8
"""Topics a file name lists by digest; an object of more topics is named ``all``."""

TRACE_SCHEMA = pa.schema(
    [
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("message_id", pa.string()),
        pa.field("queue", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("lease_topic", pa.string()),
        pa.field("group", pa.string()),
        pa.field("client_id", pa.string()),
        pa.field("producer_id", pa.string()),
        pa.field("attempt", pa.int32()),
        pa.field("invisible_until", pa.timestamp("ms", tz="UTC")),
        pa.field("delivery_timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("born_timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("target_topic", pa.string()),
        pa.field("reason", pa.string()),
        pa.field("transaction_id", pa.string()),
    ],
    metadata={"cirrusmq.trace_schema_version": SCHEMA_VERSION},
)
COLUMNS = tuple(TRACE_SCHEMA.names)
_TIMES = ("time", "invisible_until", "delivery_timestamp", "born_timestamp")


def topic_digest(topic: str) -> str:
    """The 8-hex digest naming ``topic`` in trace object names."""
    return hashlib.sha256(topic.encode()).hexdigest()[:8]


def hour_prefix(time_ms: int) -> str:
    """The key prefix of the trace objects written in the hour holding ``time_ms``."""
    at = dt.datetime.fromtimestamp(time_ms / 1000, tz=dt.UTC)
    return f"{TRACE_PREFIX}dt={at:%Y-%m-%d}/hour={at:%H}/"


def _ulid_time(time_ms: int) -> str:
    """The 10-character time part of a ULID of ``time_ms`` (sorts as the time does)."""
    return str(ULID.from_timestamp(time_ms / 1000))[:10]


def object_key(request_id: str, time_ms: int, topics: Sequence[str]) -> str:
    """The key of a request's trace object."""
    names = sorted({topic_digest(t) for t in topics})
    tail = "_".join(names) if 0 < len(names) <= MAX_NAMED_TOPICS else "all"
    return f"{hour_prefix(time_ms)}{request_id}.{tail}.parquet"


def may_concern(key: str, topic: str) -> bool:
    """Whether the object ``key`` may hold events of ``topic`` (from its name alone)."""
    tail = key.rsplit("/", 1)[-1].split(".")
    return len(tail) < 3 or tail[1] == "all" or topic_digest(topic) in tail[1].split("_")


def encode(events: Sequence[dict[str, Any]]) -> bytes:
    """Events (dicts of :data:`COLUMNS`; missing ones null) → Parquet bytes (zstd)."""
    table = pa.Table.from_pydict(
        {name: [e.get(name) for e in events] for name in COLUMNS}, schema=TRACE_SCHEMA
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def decode(data: bytes) -> list[dict[str, Any]]:
    """Parquet bytes → events, times as milliseconds since the epoch."""
    table = pq.read_table(io.BytesIO(data))
    rows = table.to_pylist()
    for row in rows:
        for name in _TIMES:
            value = row.get(name)
            if isinstance(value, dt.datetime):
                row[name] = int(value.timestamp() * 1000)
    return rows


class TraceObjectStore:
    """Writes, lists and reads trace objects."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def put(self, key: str, data: bytes, *, retention_hours: int) -> None:
        """Write one trace object (one PUT), tagged with its lifecycle tier."""
        self._client.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=data,
            ContentType="application/vnd.apache.parquet",
            Tagging=urlencode({RETENTION_TAG: retention_tier_days(retention_hours)}),
        )

    def keys_between(self, start_ms: int, end_ms: int, *, max_pages: int) -> Iterator[str]:
        """Keys of the objects written from ``start_ms`` to ``end_ms`` (to the millisecond:
        the request ULIDs in the names carry it), in time order: one LIST per 1,000 keys, at
        most ``max_pages`` LISTs. The listing starts at ``start_ms`` itself, not at the
        start of its hour, so a busy hour before it costs no LIST and no read."""
        start_ms, end_ms = max(start_ms, 0), max(end_ms, 0)
        first = hour_prefix(start_ms) + _ulid_time(start_ms)
        last_hour, last_time = hour_prefix(end_ms), _ulid_time(end_ms)
        token: str | None = None
        for _ in range(max_pages):
            request: dict[str, Any] = {"Bucket": self._bucket, "Prefix": TRACE_PREFIX}
            if token:
                request["ContinuationToken"] = token
            else:
                request["StartAfter"] = first
            page = self._client.list_objects_v2(**request)
            for entry in page.get("Contents", []):
                key = entry["Key"]
                hour = key[: len(last_hour)]
                name = key[len(last_hour) :]
                if hour > last_hour or (hour == last_hour and name[: len(last_time)] > last_time):
                    return
                yield key
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def read(self, key: str) -> list[dict[str, Any]]:
        """The events of one object ([] if it expired since it was listed)."""
        try:
            data = self._client.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        except self._client.exceptions.NoSuchKey:
            return []
        return decode(data)
