"""Reading slices of batch objects into Arrow record batches (executor side).

An executor fetches each object straight from S3 (boto3; ``fetchThreads`` GETs in flight
while it decodes those that arrived), decodes it with pyarrow and cuts the rows of its
slice, in the planned order; offsets come from the slice (``base_offset + row``). Version 1
objects lack the broker-written columns: they read as null (``reconsume_count`` as 0).

The index item is the truth: an object whose row count differs from its item's ``count``
is logged as the error ``batch_count_mismatch`` (as the broker's reader does) and read as
the index says: rows beyond ``count`` are never read, missing rows are missing offsets.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..large_body import SIZE_ATTRIBUTES, extended_pointer, payload_size
from .options import StackOptions
from .planning import Slice
from .schema import SCHEMA_DDL

__all__ = ["ARROW_SCHEMA", "SCHEMA_DDL", "read_slices", "slice_rows"]

_TS = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("queue", pa.int32()),
        ("offset", pa.int64()),
        ("message_id", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("tag", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("body", pa.binary()),
        ("message_group", pa.string()),
        ("born_timestamp", _TS),
        ("stored_timestamp", _TS),
        ("delivery_timestamp", _TS),
        ("origin_topic", pa.string()),
        ("origin_queue", pa.int32()),
        ("origin_offset", pa.int64()),
        ("reconsume_count", pa.int32()),
        ("dead_letter_reason", pa.string()),
        ("transaction_id", pa.string()),
        ("producer_id", pa.string()),
        ("producer_sequence", pa.int64()),
        ("body_bucket", pa.string()),
        ("body_key", pa.string()),
        ("body_size", pa.int64()),
        ("body_sha256", pa.string()),
    ]
)
log = logging.getLogger("cirrusmq.spark")

COUNT_MISMATCH = "batch_count_mismatch"
"""The stable name of the error logged when an object's rows disagree with its index item."""

POINTER_COLUMNS = ("body_bucket", "body_key", "body_size", "body_sha256")
_FROM_OBJECT = [
    f.name
    for f in ARROW_SCHEMA
    if f.name not in ("topic", "queue", "offset") and f.name not in POINTER_COLUMNS
]
SHA256_PROPERTY = "cirrusmq.body.sha256"
KEY_PROPERTY = "cirrusmq.body.key"
"""Set by the service alone, on a large message whose key it checked."""

_clients: dict[StackOptions, Any] = {}
_lock = threading.Lock()


def s3_client(stack: StackOptions) -> Any:
    """One S3 client per options per process (executors reuse it across tasks)."""
    with _lock:
        client = _clients.get(stack)
        if client is None:
            client = _clients[stack] = stack.client("s3")
        return client


def read_slices(
    stack: StackOptions,
    topic: str,
    slices: Iterable[Slice],
    *,
    read_large_bodies: bool = False,
    fetch_threads: int = 1,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``slices`` as record batches of :data:`ARROW_SCHEMA`, in their order; with
    ``read_large_bodies``, a large message's ``body`` is its object's content.

    Up to ``fetch_threads`` objects are fetched at once (S3 answers each GET after a round
    trip; the task decodes one object while the next ones are on their way). An object
    deleted since planning (retention, a purge) is skipped: its offsets are gone.
    """
    client = s3_client(stack)

    def fetch(piece: Slice) -> bytes | None:
        try:
            bucket = stack.bucket_of(piece.object_key)
            return client.get_object(Bucket=bucket, Key=piece.object_key)["Body"].read()
        except client.exceptions.NoSuchKey:
            return None

    for piece, data in _fetched(slices, fetch, fetch_threads):
        if data is None:
            continue
        batch = slice_rows(pq.read_table(pa.BufferReader(data)), topic, piece)
        if read_large_bodies:
            batch = with_large_bodies(batch, client, stack)
        if batch.num_rows:
            yield batch


def _fetched(
    slices: Iterable[Slice], fetch: Any, threads: int
) -> Iterator[tuple[Slice, bytes | None]]:
    """``(slice, fetch(slice))`` in the order of ``slices``, at most ``threads`` fetches in
    flight (so at most that many fetched objects wait in memory)."""
    if threads <= 1:
        for piece in slices:
            yield piece, fetch(piece)
        return
    pending: deque[tuple[Slice, Future]] = deque()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="cirrusmq-get") as pool:
        try:
            for piece in slices:
                if len(pending) >= threads:
                    first, future = pending.popleft()
                    yield first, future.result()
                pending.append((piece, pool.submit(fetch, piece)))
            while pending:
                first, future = pending.popleft()
                yield first, future.result()
        finally:  # a task stopped early (a limit) waits for no GET it will not use
            for _, future in pending:
                future.cancel()


def slice_rows(table: pa.Table, topic: str, piece: Slice) -> pa.RecordBatch:
    """Rows ``[piece.first, piece.end)`` of a decoded object, with topic, queue and offset."""
    if piece.count is not None and table.num_rows != piece.count:
        _report_mismatch(topic, piece, table.num_rows)
    start = piece.first - piece.base_offset
    rows = table.slice(start, max(0, min(piece.end - piece.first, table.num_rows - start)))
    n = rows.num_rows
    columns: list[pa.Array] = [
        pa.array([topic] * n, pa.string()),
        pa.array([piece.queue] * n, pa.int32()),
        pa.array(range(piece.first, piece.first + n), pa.int64()),
    ]
    for name in _FROM_OBJECT:
        kind = ARROW_SCHEMA.field(name).type
        if name in rows.column_names:
            columns.append(rows[name].combine_chunks().cast(kind))
        elif name == "reconsume_count":  # version 1: no broker-written columns
            columns.append(pa.array([0] * n, kind))
        else:
            columns.append(pa.nulls(n, kind))
    columns += pointer_columns(columns[_FIELD["body"]], columns[_FIELD["properties"]])
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


_FIELD = {name: i for i, name in enumerate(ARROW_SCHEMA.names)}


def pointer_columns(bodies: pa.Array, properties: pa.Array) -> list[pa.Array]:
    """``body_bucket``, ``body_key``, ``body_size``, ``body_sha256`` of each row: a large
    message's pointer (a body that is the Extended Client's pointer JSON and a size
    property), nulls for an inline body. Rows are looked at one by one only when some row
    has a size property (most objects hold none: their columns are all null at once)."""
    if not _any_size_property(properties):
        return [pa.nulls(len(bodies), ARROW_SCHEMA.field(name).type) for name in POINTER_COLUMNS]
    found: list[tuple[str, str, int, str | None] | None] = [
        _pointer(body, dict(props or ()))
        for body, props in zip(bodies.to_pylist(), properties.to_pylist(), strict=True)
    ]
    return [
        pa.array([p[0] if p else None for p in found], pa.string()),
        pa.array([p[1] if p else None for p in found], pa.string()),
        pa.array([p[2] if p else None for p in found], pa.int64()),
        pa.array([p[3] if p else None for p in found], pa.string()),
    ]


def _any_size_property(properties: pa.Array) -> bool:
    """Whether any row's properties name an Extended Client's size attribute."""
    if not isinstance(properties, pa.MapArray):
        return True  # let the row-by-row path decide
    if len(properties) == 0:  # may have no offsets buffer at all
        return False
    offsets = properties.offsets  # of this (maybe sliced) array's rows only
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    names = properties.keys.slice(first, last - first)
    return pc.any(pc.is_in(names, value_set=_SIZE_NAMES)).as_py() is True


_SIZE_NAMES = pa.array(SIZE_ATTRIBUTES, pa.string())


def _pointer(body: bytes | None, props: dict[str, str]) -> tuple[str, str, int, str | None] | None:
    size = payload_size(next((props[name] for name in SIZE_ATTRIBUTES if name in props), None))
    if size is None or not body:
        return None
    found = extended_pointer(body)
    if found is None:
        return None
    return found[0], found[1], size, props.get(SHA256_PROPERTY)


def with_large_bodies(batch: pa.RecordBatch, client: Any, stack: StackOptions) -> pa.RecordBatch:
    """``batch`` with each large message's ``body`` replaced by its object's content (a
    body past its retention stays the pointer).

    The client reads with the stack's credentials, so a pointer into one of the stack's
    buckets is followed only when the service checked it (its ``cirrusmq.body.key``, which
    only the service sets, names the object): any producer can send an inline body shaped
    like a pointer, and following it would copy another topic's body or batch into this
    topic's rows. An Extended Client's payload in its own bucket is read as it names it.
    An object whose size is not the stated one stays the pointer (it is never loaded).
    """
    buckets, keys = batch.column("body_bucket").to_pylist(), batch.column("body_key").to_pylist()
    if not any(keys):
        return batch
    sizes = batch.column("body_size").to_pylist()
    bodies = batch.column("body").to_pylist()
    properties = batch.column("properties").to_pylist()
    own = {stack.bucket, stack.batch_objects_bucket}
    for row, (bucket, key) in enumerate(zip(buckets, keys, strict=True)):
        if key is None:
            continue
        if bucket in own and (
            bucket != stack.bucket or dict(properties[row] or ()).get(KEY_PROPERTY) != key
        ):
            continue
        try:
            found = client.get_object(Bucket=bucket, Key=key)
        except client.exceptions.NoSuchKey:
            continue
        if found["ContentLength"] != sizes[row]:  # not the payload the message states:
            found["Body"].close()  # never load an object of any size
            continue
        bodies[row] = found["Body"].read()
    columns = list(batch.columns)
    columns[_FIELD["body"]] = pa.array(bodies, pa.binary())
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def _report_mismatch(topic: str, piece: Slice, rows: int) -> None:
    fields = {
        "event": COUNT_MISMATCH,
        "topic": topic,
        "queue": piece.queue,
        "base_offset": piece.base_offset,
        "object_key": piece.object_key,
        "indexed_count": piece.count,
        "object_rows": rows,
    }
    log.error("%s %s", COUNT_MISMATCH, json.dumps(fields, sort_keys=True), extra=fields)
