"""The ``cirrusmq`` PySpark data source: batch and streaming reads through the log index.

Semantics follow Spark's Kafka source: ``startingOffsets`` / ``endingOffsets`` are
``earliest``, ``latest`` or JSON offsets per queue (``{"<topic>": {"0": 12, "1": -2}}``, -2
earliest, -1 latest), ``startingTimestamp`` / ``endingTimestamp`` (ms) pick offsets by the
time batches were stored. Streaming offsets are ``{"<queue>": next offset}``;
``maxOffsetsPerTrigger`` bounds a micro-batch. With ``trace`` = ``true`` it reads the
message trace events instead (trace.py). See docs/spark.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .options import LATEST, ReadOptions, StackOptions, get
from .planning import QueueLog, Slice, limit_offsets
from .schema import SCHEMA_DDL
from .trace import TRACE_SCHEMA_DDL, TraceBatchReader, TraceQuery, wants_trace

FORMAT = "cirrusmq"
HEADS_REUSE_SECONDS = 1.0
"""An idle stream reads the queue heads at most this often (see docs/spark.md)."""


@dataclass
class ObjectsPartition(InputPartition):
    """One Spark task: slices of a bounded number of batch objects."""

    slices: list[Slice]


class CirrusMQDataSource(DataSource):
    """``spark.read.format("cirrusmq")`` / ``spark.readStream.format("cirrusmq")``."""

    defaults: ClassVar[dict[str, str]] = {}
    """Options a read gets unless it sets them (:func:`with_defaults`)."""

    def __init__(self, options: dict[str, str]) -> None:
        merged = dict(options)
        for name, value in self.defaults.items():
            if get(options, name) is None:
                merged[name] = value
        super().__init__(merged)

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return TRACE_SCHEMA_DDL if wants_trace(self.options) else SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        if wants_trace(self.options):  # message trace events (trace.py), not a topic
            return TraceBatchReader(
                StackOptions.parse(self.options), TraceQuery.parse(self.options)
            )
        return CirrusMQBatchReader(
            StackOptions.parse(self.options), ReadOptions.parse(self.options)
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return CirrusMQStreamReader(
            StackOptions.parse(self.options), ReadOptions.parse(self.options)
        )


def with_defaults(defaults: dict[str, str]) -> type[CirrusMQDataSource]:
    """The data source with ``defaults`` for options a read leaves unset (a class of its
    own, which Spark ships to its Python workers by value, defaults included)."""
    namespace = {"defaults": defaults, "__module__": __name__}
    return type(CirrusMQDataSource.__name__, (CirrusMQDataSource,), namespace)


class _Reading:
    stack: StackOptions
    query: ReadOptions

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        if not isinstance(partition, ObjectsPartition):  # Spark's stand-in when none planned
            return iter(())
        from .rows import read_slices  # pyarrow: executors only, not the planner process

        return read_slices(
            self.stack,
            self.query.topic,
            partition.slices,
            read_large_bodies=self.query.read_large_bodies,
            fetch_threads=self.query.fetch_threads,
        )

    def _log(self) -> QueueLog:
        return QueueLog(self.stack, self.query.topic, self.query.queues)

    def _partitions(self, log: QueueLog, start: dict[int, int], end: dict[int, int]) -> list:
        groups = log.plan(start, end, self.query)
        return [ObjectsPartition(group) for group in groups]


class CirrusMQBatchReader(_Reading, DataSourceReader):
    """A batch read of ``[startingOffsets, endingOffsets)`` of every queue."""

    def __init__(self, stack: StackOptions, read: ReadOptions) -> None:
        self.stack, self.query = stack, read

    def partitions(self) -> list[InputPartition]:
        log = self._log()
        start, end = log.batch_range(self.query)
        return self._partitions(log, start, end)


class CirrusMQStreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of every queue's new messages; offsets are ``{"<queue>": next offset}``."""

    def __init__(self, stack: StackOptions, read: ReadOptions) -> None:
        self.stack, self.query = stack, read
        self._target: dict[int, int] | None = None
        self._cached_log: QueueLog | None = None
        self._cached_heads: tuple[float, dict[int, int]] | None = None

    def initialOffset(self) -> dict:
        log = self._log()
        heads = log.heads()
        start = log.resolve(
            self.query.starting,
            self.query.starting_timestamp,
            heads,
            default=LATEST,
            what="startingOffsets",
        )
        return _offset_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.query.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._stream_log().heads()

    def __getstate__(self) -> dict:
        """Pickled without the driver-side caches (a boto3 client does not pickle)."""
        return {**self.__dict__, "_cached_log": None, "_cached_heads": None}

    def _stream_log(self) -> QueueLog:
        """One QueueLog (boto3 client, queue list) for the stream's life: Spark polls
        ``latestOffset`` every few milliseconds when idle."""
        if self._cached_log is None:
            self._cached_log = self._log()
        return self._cached_log

    def _heads(self) -> dict[int, int]:
        """The queue heads, read at most once per ``HEADS_REUSE_SECONDS`` (an idle stream
        costs one batched read a second, not one per Spark poll)."""
        now = time.monotonic()
        if self._cached_heads is None or now - self._cached_heads[0] >= HEADS_REUSE_SECONDS:
            self._cached_heads = (now, self._stream_log().heads())
        return dict(self._cached_heads[1])

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = _offsets(start)
        latest = self._target if self._target is not None else self._heads()
        latest = {q: max(h, begin.get(q, 0)) for q, h in latest.items()}
        begin = {q: begin.get(q, 0) for q in latest}  # a queue added since: from its start
        if isinstance(limit, ReadMaxRows):
            begin = self._retained(begin, latest, limit.max_rows)
            latest = limit_offsets(begin, latest, limit.max_rows)
        return _offset_json({**begin, **latest})

    def _retained(self, begin: dict[int, int], latest: dict[int, int], limit: int) -> dict:
        """``begin`` moved up to each queue's earliest retained offset where retention
        removed what lies behind it: otherwise the limit is spent on offsets that are gone
        (a stream behind retention would read nothing, or far too little, per batch)."""
        if sum(latest[q] - begin[q] for q in latest) <= limit:
            return begin  # everything fits in one batch: nothing to clamp
        log = self._stream_log()
        return {
            q: max(b, log.earliest(q, latest[q])) if b < latest[q] else b for q, b in begin.items()
        }

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        begin, finish = _offsets(start), _offsets(end)
        begin = {q: begin.get(q, 0) for q in finish}
        return self._partitions(self._stream_log(), begin, finish)

    def commit(self, end: dict) -> None:
        """Nothing to release: the data is immutable and the checkpoint holds the offsets."""


def _offset_json(offsets: dict[int, int]) -> dict[str, int]:
    return {str(q): int(o) for q, o in sorted(offsets.items())}


def _offsets(data: dict) -> dict[int, int]:
    return {int(q): int(o) for q, o in data.items()}
