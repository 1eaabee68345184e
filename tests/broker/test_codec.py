import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cirrusmq_broker.codec import (
    BATCH_SCHEMA,
    SCHEMA_VERSION,
    SYSTEM_COLUMNS,
    decode_batch,
    encode_batch,
)
from cirrusmq_broker.model import NewMessage, ProducerStamp, SystemFields


def test_round_trip_keeps_every_field():
    messages = [
        NewMessage(
            "id-1", b"\x00binary\xff", "TagA", ("k1", "k2"), {"p": "v"}, "g1", 1_700_000_000_123
        ),
        NewMessage("id-2", b"x", None, (), {}, None, 1_700_000_000_124),
    ]
    data = encode_batch(messages, stored_timestamp=1_700_000_000_999, stamp=ProducerStamp("p", 7))

    decoded = decode_batch(data, topic="t", queue=3, base_offset=40)

    assert [(m.offset, m.queue, m.topic) for m in decoded] == [(40, 3, "t"), (41, 3, "t")]
    first, second = decoded
    assert (first.message_id, first.body, first.tag, first.keys) == (
        "id-1",
        b"\x00binary\xff",
        "TagA",
        ("k1", "k2"),
    )
    assert first.properties == {"p": "v"} and first.message_group == "g1"
    assert first.born_timestamp == 1_700_000_000_123
    assert first.stored_timestamp == 1_700_000_000_999
    assert (second.tag, second.keys, second.properties, second.message_group) == (
        None,
        (),
        {},
        None,
    )


def test_object_is_zstd_parquet_with_versioned_schema():
    data = encode_batch([NewMessage("a", b"b", born_timestamp=1)], stored_timestamp=2, stamp=None)
    file = pq.ParquetFile(io.BytesIO(data))
    assert file.schema_arrow.metadata[b"cirrusmq.schema_version"] == SCHEMA_VERSION.encode()
    assert file.metadata.row_group(0).column(0).compression == "ZSTD"


def test_system_fields_round_trip_and_default_to_empty():
    moved = SystemFields(
        delivery_timestamp=1_700_000_005_000,
        origin_topic="orders",
        origin_queue=3,
        origin_offset=42,
        reconsume_count=2,
        dead_letter_reason="max delivery attempts (16) reached",
        transaction_id="tx-1",
    )
    data = encode_batch(
        [NewMessage("a", b"b", born_timestamp=1, system=moved), NewMessage("c", b"d")],
        stored_timestamp=2,
        stamp=None,
    )
    first, second = decode_batch(data, topic="t", queue=0, base_offset=0)
    assert first.system == moved
    assert second.system == SystemFields()


def test_version_1_objects_decode_with_empty_system_fields():
    v1 = pa.schema([f for f in BATCH_SCHEMA if f.name not in SYSTEM_COLUMNS])
    table = pa.Table.from_pydict(
        {
            "message_id": ["a"],
            "body": [b"b"],
            "tag": [None],
            "keys": [[]],
            "properties": [[]],
            "message_group": [None],
            "born_timestamp": [1],
            "stored_timestamp": [2],
            "producer_id": [None],
            "producer_sequence": [None],
        },
        schema=v1.with_metadata({"cirrusmq.schema_version": "1"}),
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    (message,) = decode_batch(sink.getvalue(), topic="t", queue=0, base_offset=5)
    assert (message.offset, message.system) == (5, SystemFields())


@pytest.mark.parametrize(
    "system",
    [
        SystemFields(delivery_timestamp=5),
        SystemFields(origin_topic="orders"),
        SystemFields(origin_queue=0),
        SystemFields(origin_offset=0),
        SystemFields(reconsume_count=1),
        SystemFields(dead_letter_reason="expired"),
        SystemFields(transaction_id="tx-1"),
    ],
    ids=SYSTEM_COLUMNS,
)
def test_any_one_system_field_is_kept_among_plain_rows(system):
    messages = [
        NewMessage("a", b"1"),
        NewMessage("b", b"2", system=system),
        NewMessage("c", b"3"),
        NewMessage("d", b"4", system=system),
    ]
    data = encode_batch(messages, stored_timestamp=2, stamp=None)
    decoded = decode_batch(data, topic="t", queue=0, base_offset=0)
    assert [m.system for m in decoded] == [SystemFields(), system, SystemFields(), system]


def test_a_row_with_a_null_reconsume_count_keeps_its_other_system_fields():
    # written by another writer: the column nullable, the origin set, the count missing
    schema = pa.schema(
        [f.with_nullable(True) if f.name == "reconsume_count" else f for f in BATCH_SCHEMA],
        metadata=BATCH_SCHEMA.metadata,
    )
    data = encode_batch([NewMessage("a", b"b", born_timestamp=1)], stored_timestamp=2, stamp=None)
    table = pq.read_table(io.BytesIO(data)).cast(schema)
    origin = table.schema.get_field_index("origin_topic")
    table = table.set_column(origin, "origin_topic", pa.array(["orders"], pa.string()))
    count = table.schema.get_field_index("reconsume_count")
    table = table.set_column(count, schema.field(count), pa.array([None], pa.int32()))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    (message,) = decode_batch(sink.getvalue(), topic="t", queue=0, base_offset=0)
    assert message.system.origin_topic == "orders"
