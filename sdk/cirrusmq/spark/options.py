"""The options of the ``cirrusmq`` Spark data source: where the stack is and what to read.

Every option is a string (Spark's data source options are). Names are case-insensitive in
Spark; here they are read through :func:`get`, which accepts any case.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

EARLIEST = -2
"""Kafka's convention in JSON offsets: -2 is the earliest retained offset."""
LATEST = -1
"""Kafka's convention in JSON offsets: -1 is the queue's end (the next offset)."""

DEFAULT_OBJECTS_PER_PARTITION = 8
"""Objects per input partition of a trace read (``format("cirrusmq")`` with ``trace``)."""
DEFAULT_MAX_PARTITION_BYTES = 128 * 1024 * 1024
"""Spark's ``spark.sql.files.maxPartitionBytes``: the most bytes one read task is given."""
DEFAULT_OPEN_COST_BYTES = 4 * 1024 * 1024
"""Spark's ``spark.sql.files.openCostInBytes``: an object's GET counted as this many bytes
more (a task of many small objects spends its time on round trips, not bytes)."""
DEFAULT_FETCH_THREADS = 4
"""Batch objects a read task fetches at once (a GET is mostly waiting for the answer)."""
MAX_FETCH_THREADS = 64
DIRECTORY_BUCKET_KEY = re.compile(r"retention_days=\d+/topics/")
"""A batch object key filed under a retention tier: only a directory bucket holds it
(a stack deployed with ``BatchStorage=express``)."""


class OptionError(ValueError):
    """A data source option is missing or malformed."""


def get(options: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    """``options[name]`` whatever the case of the key (Spark lower-cases some of them)."""
    wanted = name.lower()
    for key, value in options.items():
        if key.lower() == wanted:
            return value
    return default


@dataclass(frozen=True)
class StackOptions:
    """Where the bucket and the tables are, and how to reach them (picklable)."""

    bucket: str
    log_index_table: str
    queue_heads_table: str
    topics_table: str | None = None
    groups_table: str | None = None
    endpoint: str | None = None
    """AWS endpoint override (the local stack's moto server); None on AWS."""
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    clock_offset_ms: int = 0
    """How far the broker's clock is ahead of the wall clock (a local stack's advance_time)."""
    batch_bucket: str | None = None
    """Where the topics' batch objects are when not in ``bucket`` (a stack deployed with
    ``BatchStorage=express``: its ``BatchBucketName`` output)."""

    @property
    def batch_objects_bucket(self) -> str:
        """The bucket the index's object keys are in."""
        return self.batch_bucket or self.bucket

    def bucket_of(self, object_key: str) -> str:
        """The bucket holding the batch object the index names ``object_key``.

        OptionError for a directory bucket's key without ``batchBucket``: the message
        bucket never holds it, and reading its absence as an expired object would make
        every message of the topic silently missing."""
        if self.batch_bucket is None and DIRECTORY_BUCKET_KEY.match(object_key):
            raise OptionError(
                f"the index names {object_key!r}, a key of an S3 Express One Zone directory "
                "bucket (a stack deployed with BatchStorage=express): set the batchBucket "
                "option to the stack's BatchBucketName output"
            )
        return self.batch_objects_bucket

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StackOptions:
        def required(name: str) -> str:
            value = get(options, name)
            if not value:
                raise OptionError(f"the cirrusmq data source needs the option {name!r}")
            return value

        return cls(
            bucket=required("bucket"),
            log_index_table=required("logIndexTable"),
            queue_heads_table=required("queueHeadsTable"),
            topics_table=get(options, "topicsTable") or None,
            groups_table=get(options, "groupsTable") or None,
            endpoint=get(options, "endpoint") or None,
            region=get(options, "region") or None,
            access_key_id=get(options, "accessKeyId") or None,
            secret_access_key=get(options, "secretAccessKey") or None,
            session_token=get(options, "sessionToken") or None,
            clock_offset_ms=_int(options, "clockOffsetMs", 0),
            batch_bucket=get(options, "batchBucket") or None,
        )

    def now_s(self) -> int:
        """The broker's time in seconds (what retention is measured against)."""
        return (time.time_ns() // 1_000_000 + self.clock_offset_ms) // 1000

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` with these options (one per call; cache it)."""
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            aws_session_token=self.session_token,
            region_name=self.region,
        )
        config = Config(retries={"max_attempts": 5, "mode": "standard"}, max_pool_connections=16)
        return session.client(service, endpoint_url=self.endpoint, config=config)


@dataclass(frozen=True)
class ReadOptions:
    """What to read: a topic and an offset range (Spark's Kafka source semantics)."""

    topic: str
    starting: str | None
    ending: str | None
    starting_timestamp: int | None
    ending_timestamp: int | None
    queues: int | None
    objects_per_partition: int | None
    """``objectsPerPartition``: input partitions of at most that many objects of one queue;
    None (the default): partitions packed by bytes (:attr:`max_partition_bytes`...)."""
    max_offsets_per_trigger: int | None
    read_large_bodies: bool = False
    """``largeBodies=read``: a large message's ``body`` is its object's content (each read
    whole into the executor's memory); ``pointer`` (the default): the pointer JSON."""
    fetch_threads: int = DEFAULT_FETCH_THREADS
    max_partition_bytes: int = DEFAULT_MAX_PARTITION_BYTES
    open_cost_bytes: int = DEFAULT_OPEN_COST_BYTES
    min_partitions: int | None = None
    """``minPartitions``: split a read over at least this many tasks while it has as many
    objects; ``register(spark)`` makes the session's default parallelism the default, and
    without one it is the cores of the machine that plans the read."""

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        topic = get(options, "topic")
        if not topic:
            raise OptionError("the cirrusmq data source needs the option 'topic'")
        per_partition = _int(options, "objectsPerPartition", None)
        if per_partition is not None and per_partition < 1:
            raise OptionError("objectsPerPartition must be at least 1")
        packing = {
            name: _int(options, name, default)
            for name, default in (
                ("maxPartitionBytes", DEFAULT_MAX_PARTITION_BYTES),
                ("openCostInBytes", DEFAULT_OPEN_COST_BYTES),
                ("minPartitions", None),
            )
        }
        minimum = packing["minPartitions"]
        if packing["maxPartitionBytes"] < 1 or (minimum is not None and minimum < 1):
            raise OptionError("maxPartitionBytes and minPartitions must be at least 1")
        if packing["openCostInBytes"] < 0:
            raise OptionError("openCostInBytes must not be negative")
        max_offsets = _int(options, "maxOffsetsPerTrigger", None)
        if max_offsets is not None and max_offsets < 1:
            raise OptionError("maxOffsetsPerTrigger must be at least 1")
        large_bodies = (get(options, "largeBodies") or "pointer").lower()
        if large_bodies not in ("pointer", "read"):
            raise OptionError("largeBodies is 'pointer' (the default) or 'read'")
        fetch_threads = _int(options, "fetchThreads", DEFAULT_FETCH_THREADS)
        if not 1 <= fetch_threads <= MAX_FETCH_THREADS:
            raise OptionError(f"fetchThreads must be between 1 and {MAX_FETCH_THREADS}")
        return cls(
            read_large_bodies=large_bodies == "read",
            topic=topic,
            starting=get(options, "startingOffsets"),
            ending=get(options, "endingOffsets"),
            starting_timestamp=_int(options, "startingTimestamp", None),
            ending_timestamp=_int(options, "endingTimestamp", None),
            queues=_int(options, "queues", None),
            objects_per_partition=per_partition,
            max_offsets_per_trigger=max_offsets,
            fetch_threads=fetch_threads,
            max_partition_bytes=packing["maxPartitionBytes"],
            open_cost_bytes=packing["openCostInBytes"],
            min_partitions=packing["minPartitions"],
        )


def parse_offsets(text: str, topic: str, *, what: str) -> int | dict[int, int]:
    """``earliest`` / ``latest`` as :data:`EARLIEST` / :data:`LATEST`, or a JSON object of
    offsets per queue: ``{"<topic>": {"0": 12, "1": -2}}`` (Kafka's form) or ``{"0": 12}``."""
    word = text.strip().lower()
    if word == "earliest":
        return EARLIEST
    if word == "latest":
        return LATEST
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise OptionError(f"{what}: 'earliest', 'latest' or JSON, not {text!r}") from exc
    if isinstance(data, dict) and topic in data and isinstance(data[topic], dict):
        data = data[topic]
    if not isinstance(data, dict):
        raise OptionError(f"{what}: a JSON object of offsets per queue, not {text!r}")
    offsets: dict[int, int] = {}
    for queue, offset in data.items():
        try:
            q, o = int(queue), int(offset)
        except (TypeError, ValueError) as exc:
            raise OptionError(f"{what}: queue {queue!r} -> {offset!r} is not numbers") from exc
        if q < 0 or o < EARLIEST or isinstance(offset, bool):
            raise OptionError(f"{what}: queue {queue!r} -> {offset!r} is out of range")
        offsets[q] = o
    return offsets


def _int(options: Mapping[str, str], name: str, default: int | None) -> Any:
    value = get(options, name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise OptionError(f"option {name!r} must be an integer, not {value!r}") from exc
