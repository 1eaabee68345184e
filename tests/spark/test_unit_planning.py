"""Pure parts of the data source: options, offset limits, slicing objects (no Spark)."""

from __future__ import annotations

import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cirrusmq.spark import _default_parallelism
from cirrusmq.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    ReadOptions,
    StackOptions,
    parse_offsets,
)
from cirrusmq.spark.planning import Slice, limit_offsets, pack
from cirrusmq.spark.rows import ARROW_SCHEMA, slice_rows
from cirrusmq_broker.codec import encode_batch
from cirrusmq_broker.model import NewMessage, ProducerStamp
from hypothesis import example, given, settings
from hypothesis import strategies as st

MiB = 1024 * 1024


def test_offsets_are_words_or_json_per_queue():
    assert parse_offsets("earliest", "t", what="x") == EARLIEST
    assert parse_offsets(" LATEST ", "t", what="x") == LATEST
    assert parse_offsets('{"t": {"0": 5, "1": -2}}', "t", what="x") == {0: 5, 1: -2}
    assert parse_offsets('{"3": -1}', "t", what="x") == {3: -1}
    for bad in ("soon", "[1]", '{"0": -3}', '{"a": 1}', '{"0": true}'):
        with pytest.raises(OptionError):
            parse_offsets(bad, "t", what="x")


def test_options_are_case_insensitive_and_checked():
    stack = StackOptions.parse(
        {"BUCKET": "b", "logindextable": "i", "queueHeadsTable": "h", "clockOffsetMs": "5"}
    )
    assert (stack.bucket, stack.log_index_table, stack.clock_offset_ms) == ("b", "i", 5)
    with pytest.raises(OptionError, match="queueHeadsTable"):
        StackOptions.parse({"bucket": "b", "logIndexTable": "i"})
    read = ReadOptions.parse({"topic": "t", "maxOffsetsPerTrigger": "10"})
    assert (read.max_offsets_per_trigger, read.objects_per_partition) == (10, None)
    assert (read.max_partition_bytes, read.open_cost_bytes, read.min_partitions) == (
        128 * MiB,
        4 * MiB,
        None,  # the session's parallelism (register), else the planning machine's cores
    )
    for bad in (
        {},
        {"topic": "t", "objectsPerPartition": "0"},
        {"topic": "t", "queues": "x"},
        {"topic": "t", "minPartitions": "0"},
        {"topic": "t", "maxPartitionBytes": "0"},
        {"topic": "t", "openCostInBytes": "-1"},
    ):
        with pytest.raises(OptionError):
            ReadOptions.parse(bad)


def slices_of(*sizes: int, queue: int = 0) -> list[Slice]:
    return [Slice(queue, f"q{queue}/{i}", i, i, i + 1, size) for i, size in enumerate(sizes)]


def test_objects_are_packed_by_bytes_across_queues():
    small = slices_of(*[128 * 1024] * 5, queue=0) + slices_of(*[128 * 1024] * 5, queue=1)

    def packed(slices: list[Slice], **options: int) -> list[list[Slice]]:
        settings = {"max_partition_bytes": 128 * MiB, "open_cost_bytes": 4 * MiB}
        settings = {**settings, "min_partitions": 1, **options}
        groups = pack(slices, **settings)
        assert [s for g in groups for s in g] == slices  # every slice once, in order
        return groups

    # small objects: one task for them all, or as many as the cores, spanning queues
    assert [len(g) for g in packed(small)] == [10]
    assert [len(g) for g in packed(small, min_partitions=2)] == [5, 5]
    assert [len(g) for g in packed(small, min_partitions=3)] == [4, 4, 2]  # heaviest: 4
    # never more tasks than objects
    assert [len(g) for g in packed(small[:2], min_partitions=8)] == [1, 1]
    # large objects: a task gets about max_partition_bytes
    large = slices_of(*[60 * MiB] * 6)
    assert [len(g) for g in packed(large)] == [2, 2, 2]
    assert [len(g) for g in packed(large, min_partitions=6)] == [1] * 6
    # an object counts its round trip: many tiny objects are not one task per object
    tiny = slices_of(*[1024] * 100)
    assert [len(g) for g in packed(tiny, min_partitions=4)] == [25] * 4
    assert packed([], min_partitions=2) == []
    # no task of several objects over max_partition_bytes (70 MiB each with the open cost)
    assert [len(g) for g in packed(slices_of(*[66 * MiB] * 4))] == [1, 1, 1, 1]
    # uneven sizes: still min_partitions tasks while there are as many objects
    assert [len(g) for g in packed(slices_of(100 * MiB, 1024, 1024, 1024), min_partitions=4)] == [
        1,
        1,
        1,
        1,
    ]
    lopsided = slices_of(64 * MiB, *[1024] * 20)
    assert len(packed(lopsided, min_partitions=8)) == 8
    assert len(packed(slices_of(*[0] * 6), open_cost_bytes=0, min_partitions=3)) == 3


@settings(max_examples=300, deadline=None)
@example(sizes=[1, 1, 0, 9], max_bytes=3, open_cost=1, minimum=1)  # a heavy object alone
@given(
    sizes=st.lists(st.integers(0, 300 * MiB), max_size=40),
    max_bytes=st.integers(1, 256 * MiB),
    open_cost=st.integers(0, 8 * MiB),
    minimum=st.integers(1, 50),
)
def test_packing_reads_every_object_once_within_the_limits(sizes, max_bytes, open_cost, minimum):
    slices = slices_of(*sizes)
    groups = pack(
        slices, max_partition_bytes=max_bytes, open_cost_bytes=open_cost, min_partitions=minimum
    )
    assert [s for g in groups for s in g] == slices  # every slice once, in order
    assert all(groups)
    assert len(groups) >= min(len(slices), minimum)
    for group in groups:
        if len(group) > 1:
            assert sum(max(1, s.size_bytes + open_cost) for s in group) <= max_bytes


def test_offset_limit_is_shared_by_backlog():
    start, latest = {0: 0, 1: 10, 2: 5}, {0: 100, 1: 20, 2: 5}
    assert limit_offsets(start, latest, 1000) == latest
    end = limit_offsets(start, latest, 11)
    assert sum(end[q] - start[q] for q in start) == 11
    assert end[0] - start[0] == 10 and end[1] - start[1] == 1 and end[2] == 5
    one = limit_offsets({0: 0, 1: 0}, {0: 1, 1: 1000}, 2)
    assert one == {0: 1, 1: 1}  # a small backlog is not starved


def _object(count: int) -> pq.ParquetFile:
    messages = [NewMessage(f"m{i}", f"b{i}".encode(), tag="t") for i in range(count)]
    data = encode_batch(messages, stored_timestamp=1_700_000_000_000, stamp=ProducerStamp("p", 1))
    return pq.read_table(io.BytesIO(data))


def test_a_slice_cuts_rows_and_numbers_offsets():
    table = _object(5)
    batch = slice_rows(table, "t", Slice(2, "k", 100, 102, 104, 0))
    assert batch.schema == ARROW_SCHEMA
    assert batch.column("offset").to_pylist() == [102, 103]
    assert batch.column("message_id").to_pylist() == ["m2", "m3"]
    assert batch.column("queue").to_pylist() == [2, 2]
    assert batch.column("producer_sequence").to_pylist() == [1, 1]


def test_a_version_1_object_reads_with_empty_broker_columns():
    table = _object(2)
    v1 = table.select([n for n in table.column_names if n not in _V2_ONLY])
    batch = slice_rows(v1, "t", Slice(0, "k", 0, 0, 2, 0))
    assert batch.column("reconsume_count").to_pylist() == [0, 0]
    assert batch.column("origin_topic").to_pylist() == [None, None]
    assert batch.column("delivery_timestamp").null_count == 2


_V2_ONLY = {
    "delivery_timestamp",
    "origin_topic",
    "origin_queue",
    "origin_offset",
    "reconsume_count",
    "dead_letter_reason",
    "transaction_id",
}


def test_batch_objects_are_read_from_the_batch_bucket_when_one_is_named():
    """A stack deployed with BatchStorage=express: the index's keys are in its directory
    bucket (batchBucket), the trace stays in the message bucket (bucket)."""
    import os

    import boto3
    from cirrusmq.spark.rows import read_slices
    from moto import mock_aws

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    messages = [NewMessage(f"m{i}", f"b{i}".encode()) for i in range(3)]
    data = encode_batch(messages, stored_timestamp=1_700_000_000_000, stamp=None)
    key = "retention_days=3/topics/topic=t/queue=0/dt=2023-11-14/x.parquet"
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("messages", "batches"):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket="batches", Key=key, Body=data)
        plain = StackOptions.parse(
            {"bucket": "messages", "logIndexTable": "i", "queueHeadsTable": "h"}
        )
        assert plain.batch_objects_bucket == "messages"
        express = StackOptions.parse(
            {
                "bucket": "messages",
                "batchBucket": "batches",
                "logIndexTable": "i",
                "queueHeadsTable": "h",
                "region": "us-east-1",
            }
        )
        rows = list(read_slices(express, "t", [Slice(0, key, 0, 0, 3, len(data), 3)]))
    assert [b.column("body").to_pylist() for b in rows] == [[b"b0", b"b1", b"b2"]]


def test_a_directory_bucket_key_without_batch_bucket_is_an_error_not_an_empty_read():
    """The index names a key filed under a retention tier (a BatchStorage=express stack)
    and no batchBucket is given: the message bucket has no such object, so skipping it as
    expired would read the whole topic as empty."""
    import os

    import boto3
    from cirrusmq.spark.rows import read_slices
    from moto import mock_aws

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    key = "retention_days=3/topics/topic=t/queue=0/dt=2023-11-14/x.parquet"
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="messages")
        plain = StackOptions.parse(
            {"bucket": "messages", "logIndexTable": "i", "queueHeadsTable": "h"}
        )
        with pytest.raises(OptionError, match="batchBucket"):
            list(read_slices(plain, "t", [Slice(0, key, 0, 0, 3, 100, 3)]))


def test_fetch_threads_option_defaults_to_a_few_and_is_bounded():
    assert ReadOptions.parse({"topic": "t"}).fetch_threads == 4
    assert ReadOptions.parse({"topic": "t", "FETCHTHREADS": "1"}).fetch_threads == 1
    for bad in ("0", "65", "x"):
        with pytest.raises(OptionError, match="fetchThreads"):
            ReadOptions.parse({"topic": "t", "fetchThreads": bad})


@pytest.mark.parametrize("threads", [1, 2, 4, 16])
def test_concurrent_fetches_yield_the_slices_in_order_and_skip_deleted_objects(threads):
    """GETs in flight at once change nothing in what is read: the planned order, each
    slice cut as planned, an object deleted since planning skipped."""
    import os

    import boto3
    from cirrusmq.spark.rows import read_slices
    from moto import mock_aws

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    stack = StackOptions.parse(
        {"bucket": "messages", "logIndexTable": "i", "queueHeadsTable": "h", "region": "us-east-1"}
    )
    slices = []
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="messages")
        for n in range(7):
            messages = [NewMessage(f"m{n}-{i}", f"b{n}-{i}".encode()) for i in range(4)]
            data = encode_batch(messages, stored_timestamp=1_700_000_000_000, stamp=None)
            key = f"topics/topic=t/queue=0/dt=2023-11-14/{n}.parquet"
            if n != 3:  # object 3: deleted since planning (retention)
                s3.put_object(Bucket="messages", Key=key, Body=data)
            first = 4 * n + (1 if n == 0 else 0)  # the range starts inside object 0
            slices.append(Slice(0, key, 4 * n, first, 4 * n + 4, len(data), 4))
        batches = list(read_slices(stack, "t", slices, fetch_threads=threads))
    offsets = [o for b in batches for o in b.column("offset").to_pylist()]
    bodies = [x for b in batches for x in b.column("body").to_pylist()]
    expected = [o for o in range(1, 28) if not 12 <= o < 16]
    assert offsets == expected
    assert bodies == [f"b{o // 4}-{o % 4}".encode() for o in expected]


def test_a_read_stopped_early_leaves_no_fetch_running():
    """A task that stops reading (a LIMIT) closes the generator: the fetches it will not
    use are cancelled, and closing returns."""
    import threading

    from cirrusmq.spark.rows import _fetched

    started = []

    def fetch(piece):
        started.append(piece.object_key)
        return b""

    slices = [Slice(0, f"k{n}", n, n, n + 1, 1, 1) for n in range(50)]
    reading = _fetched(slices, fetch, 4)
    assert next(reading)[0].object_key == "k0"
    reading.close()
    assert len(started) <= 5
    assert not [t for t in threading.enumerate() if t.name.startswith("cirrusmq-get")]


def test_reading_large_bodies_follows_only_pointers_the_service_checked():
    """A producer of topic ``a`` sends an inline body shaped like the Extended Client's
    pointer, naming topic ``b``'s body object (or a batch object) in the stack's buckets,
    with an ``ExtendedPayloadSize`` property. ``largeBodies=read`` fetches with the stack's
    credentials, so following it would copy ``b``'s bytes into ``a``'s rows: only a pointer
    whose ``cirrusmq.body.key`` (set by the service alone, on a key it checked) names the
    object is followed."""
    import json
    import os

    import boto3
    from cirrusmq.spark.rows import read_slices
    from moto import mock_aws

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    secret_key = "topics/topic=b/_bodies/dt=2023-11-14/01HF0000000000000000000000"
    batch_key = "topics/topic=b/queue=0/dt=2023-11-14/y.parquet"
    own_key = "topics/topic=a/_bodies/dt=2023-11-14/01HF0000000000000000000001"

    def pointer(bucket: str, key: str) -> bytes:
        body = ["software.amazon.payloadoffloading.PayloadS3Pointer"]
        return json.dumps([*body, {"s3BucketName": bucket, "s3Key": key}]).encode()

    checked = {
        "ExtendedPayloadSize": "3",
        "cirrusmq.body.key": own_key,
        "cirrusmq.body.size": "3",
        "cirrusmq.body.sha256": "0" * 64,
    }
    messages = [
        NewMessage(
            "forged", pointer("messages", secret_key), properties={"ExtendedPayloadSize": "6"}
        ),
        NewMessage("batch", pointer("batches", batch_key), properties={"ExtendedPayloadSize": "6"}),
        NewMessage("own", pointer("messages", own_key), properties=checked),
    ]
    data = encode_batch(messages, stored_timestamp=1_700_000_000_000, stamp=None)
    key = "retention_days=3/topics/topic=a/queue=0/dt=2023-11-14/x.parquet"
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("messages", "batches"):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket="batches", Key=key, Body=data)
        s3.put_object(Bucket="messages", Key=secret_key, Body=b"secret")
        s3.put_object(Bucket="batches", Key=batch_key, Body=b"rows-b")
        s3.put_object(Bucket="messages", Key=own_key, Body=b"own")
        stack = StackOptions.parse(
            {
                "bucket": "messages",
                "batchBucket": "batches",
                "logIndexTable": "i",
                "queueHeadsTable": "h",
                "region": "us-east-1",
            }
        )
        (batch,) = read_slices(
            stack, "a", [Slice(0, key, 0, 0, 3, len(data), 3)], read_large_bodies=True
        )
    bodies = batch.column("body").to_pylist()
    assert bodies == [messages[0].body, messages[1].body, b"own"]


def test_a_pointer_with_a_size_int_cannot_parse_reads_as_an_inline_body():
    """``"²".isdigit()`` is True but ``int("²")`` raises: one such message, which any
    producer may send, failed every read of its topic's object."""
    from cirrusmq.spark.rows import pointer_columns

    body = (
        b'["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]'
    )
    columns = pointer_columns(
        pa.array([body], pa.binary()),
        pa.array([[("ExtendedPayloadSize", "\u00b2")]], pa.map_(pa.string(), pa.string())),
    )
    assert [c.to_pylist() for c in columns] == [[None]] * 4


def test_reading_large_bodies_keeps_the_pointer_of_an_object_larger_than_stated():
    """An Extended Client pointer in its own bucket states 3 bytes for a bigger object: the
    executor read the whole object into memory whatever its size. It keeps the pointer."""
    import json
    import os

    import boto3
    from cirrusmq.spark.rows import read_slices
    from moto import mock_aws

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    body = json.dumps(
        [
            "software.amazon.payloadoffloading.PayloadS3Pointer",
            {"s3BucketName": "payloads", "s3Key": "big"},
        ]
    ).encode()
    messages = [NewMessage("m", body, properties={"ExtendedPayloadSize": "3"})]
    data = encode_batch(messages, stored_timestamp=1_700_000_000_000, stamp=None)
    key = "topics/topic=a/queue=0/dt=2023-11-14/x.parquet"
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for bucket in ("messages", "payloads"):
            s3.create_bucket(Bucket=bucket)
        s3.put_object(Bucket="messages", Key=key, Body=data)
        s3.put_object(Bucket="payloads", Key="big", Body=b"x" * 4096)
        stack = StackOptions.parse(
            {
                "bucket": "messages",
                "logIndexTable": "i",
                "queueHeadsTable": "h",
                "region": "us-east-1",
            }
        )
        (batch,) = read_slices(
            stack, "a", [Slice(0, key, 0, 0, 1, len(data), 1)], read_large_bodies=True
        )
    assert batch.column("body").to_pylist() == [body]


class NoContext:
    """A Spark Connect session as register() sees it: no SparkContext, a conf."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.conf = self
        self._values = conf

    @property
    def sparkContext(self):  # noqa: N802 - SparkSession's name
        raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext")

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name, default)


def test_default_parallelism_without_a_spark_context():
    assert _default_parallelism(NoContext({"spark.master": "local[3]"})) == 3
    assert _default_parallelism(NoContext({"spark.master": "local[*]"})) == os.cpu_count()
    assert _default_parallelism(NoContext({"spark.master": "local"})) == 1
    configured = {"spark.master": "yarn", "spark.default.parallelism": "48"}
    assert _default_parallelism(NoContext(configured)) == 48
    assert _default_parallelism(NoContext({"spark.master": "sc://host"})) is None


def test_the_pointer_columns_of_every_slice_match_a_row_by_row_reading():
    """The columns come at once when no row of the slice names a size attribute: every slice
    of rows with and without pointers (one outside the slice included) reads as each row
    alone reads."""
    from cirrusmq.spark.rows import _pointer, pointer_columns

    pointer = (
        b'["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]'
    )
    rows = [
        (b"inline", [("a", "1")]),
        (pointer, [("ExtendedPayloadSize", "7")]),
        (pointer, None),
        (b"x", [("SQSLargePayloadSize", "3")]),
        (pointer, [("b", "2")]),
        (b"", []),
    ]
    bodies = pa.array([body for body, _ in rows], pa.binary())
    properties = pa.array([props for _, props in rows], pa.map_(pa.string(), pa.string()))

    def one_by_one(start: int, length: int) -> list[list]:
        found = [_pointer(body, dict(props or ())) for body, props in rows[start : start + length]]
        return [[row[k] if row else None for row in found] for k in range(4)]

    for start in range(len(rows) + 1):
        for length in range(len(rows) - start + 1):
            columns = pointer_columns(bodies.slice(start, length), properties.slice(start, length))
            assert [c.to_pylist() for c in columns] == one_by_one(start, length), (start, length)
    whole = pointer_columns(bodies, properties)
    assert whole[1].to_pylist() == [None, "k", None, None, None, None]
    no_offsets = pa.Array.from_buffers(  # valid: an empty map array needs no offsets buffer
        properties.type,
        0,
        [None, None],
        children=[pa.array([], pa.struct([("key", pa.string()), ("value", pa.string())]))],
    )
    no_offsets.validate(full=True)
    empty = pointer_columns(pa.array([], pa.binary()), no_offsets)
    assert [c.to_pylist() for c in empty] == [[]] * 4
