"""Batch objects: one immutable Parquet file (zstd) per produce request and queue.

The schema is versioned in the file's metadata (``cirrusmq.schema_version``). Offsets are
not stored: a batch's offsets are ``base_offset + row`` from its log index item, which is
written after the object (so the object never depends on the race for the tail).

Version 2 added the broker-written columns (:class:`~cirrusmq_broker.model.SystemFields`):
null for a plain send; version 1 objects decode with them empty.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .model import NO_SYSTEM_FIELDS, NewMessage, ProducerStamp, StoredMessage, SystemFields

SCHEMA_VERSION = "2"

BATCH_SCHEMA = pa.schema(
    [
        pa.field("message_id", pa.string(), nullable=False),
        pa.field("body", pa.binary(), nullable=False),
        pa.field("tag", pa.string()),
        pa.field("keys", pa.list_(pa.string()), nullable=False),
        pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=False),
        pa.field("message_group", pa.string()),
        pa.field("born_timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("stored_timestamp", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("producer_id", pa.string()),
        pa.field("producer_sequence", pa.int64()),
        # version 2: what the broker records about a message it moved
        pa.field("delivery_timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("origin_topic", pa.string()),
        pa.field("origin_queue", pa.int32()),
        pa.field("origin_offset", pa.int64()),
        pa.field("reconsume_count", pa.int32(), nullable=False),
        pa.field("dead_letter_reason", pa.string()),
        pa.field("transaction_id", pa.string()),
    ],
    metadata={"cirrusmq.schema_version": SCHEMA_VERSION},
)


SYSTEM_COLUMNS = (
    "delivery_timestamp",
    "origin_topic",
    "origin_queue",
    "origin_offset",
    "reconsume_count",
    "dead_letter_reason",
    "transaction_id",
)
TIMESTAMP_COLUMNS = ("born_timestamp", "stored_timestamp", "delivery_timestamp")


def encode_batch(
    messages: Sequence[NewMessage], *, stored_timestamp: int, stamp: ProducerStamp | None
) -> bytes:
    """Encode messages into one Parquet object."""
    columns = {
        "message_id": [m.message_id for m in messages],
        "body": [m.body for m in messages],
        "tag": [m.tag for m in messages],
        "keys": [list(m.keys) for m in messages],
        "properties": [list(m.properties.items()) for m in messages],
        "message_group": [m.message_group for m in messages],
        "born_timestamp": [m.born_timestamp for m in messages],
        "stored_timestamp": [stored_timestamp] * len(messages),
        "producer_id": [stamp.producer_id if stamp else None] * len(messages),
        "producer_sequence": [stamp.sequence if stamp else None] * len(messages),
        **{name: [getattr(m.system, name) for m in messages] for name in SYSTEM_COLUMNS},
    }
    table = pa.Table.from_pydict(columns, schema=BATCH_SCHEMA)
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def decode_batch(data: bytes, *, topic: str, queue: int, base_offset: int) -> list[StoredMessage]:
    """Decode a batch object; row ``i`` is offset ``base_offset + i``."""
    table = pq.ParquetFile(io.BytesIO(data)).read()  # one file: no dataset machinery
    for name in TIMESTAMP_COLUMNS:  # as epoch ms, never as datetimes
        if name in table.column_names:
            table = table.set_column(
                table.schema.get_field_index(name), name, table[name].cast(pa.int64())
            )
    # column by column: far cheaper than a dict per row
    ids, bodies, tags, keys, properties, groups, born, stored = (
        table.column(name).to_pylist()
        for name in (
            "message_id",
            "body",
            "tag",
            "keys",
            "properties",
            "message_group",
            "born_timestamp",
            "stored_timestamp",
        )
    )
    systems = _system_column(table)
    return [
        StoredMessage(
            topic,
            queue,
            base_offset + i,
            ids[i],
            bodies[i],
            tags[i],
            tuple(keys[i] or ()),
            dict(properties[i] or ()),
            groups[i],
            born[i],
            stored[i],
            systems[i],
        )
        for i in range(table.num_rows)
    ]


def _system_column(table: pa.Table) -> list[SystemFields]:
    """Each row's system fields: NO_SYSTEM_FIELDS for a row that has none (every row of a
    version 1 object, most rows of a plain send), built only for the others."""
    if "reconsume_count" not in table.column_names:
        return [NO_SYSTEM_FIELDS] * table.num_rows
    present = pc.fill_null(pc.not_equal(table.column("reconsume_count"), 0), True)
    for name in SYSTEM_COLUMNS:
        if name != "reconsume_count":
            present = pc.or_(present, pc.is_valid(table.column(name)))
    rows = pc.indices_nonzero(present).to_pylist()
    systems = [NO_SYSTEM_FIELDS] * table.num_rows
    if rows:
        columns = {name: table.column(name).take(rows).to_pylist() for name in SYSTEM_COLUMNS}
        for j, row in enumerate(rows):
            fields = SystemFields(**{name: columns[name][j] for name in SYSTEM_COLUMNS})
            systems[row] = NO_SYSTEM_FIELDS if fields == NO_SYSTEM_FIELDS else fields
    return systems
