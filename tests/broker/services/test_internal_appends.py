"""The one append path on in-process moto: a re-run whose inputs changed after a failed
commit writes its own object and never indexes one whose rows differ from its count.

Each scene fails a commit (a throttled TransactWriteItems, or a refused one), lets the
inputs change (an ack, a cancel, the clock passing a due time), re-runs the move and
reads back what consumers get.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pyarrow.parquet as pq
import pytest
from broker_helpers import ack_statuses, object_keys, send
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import Throttled
from cirrusmq_broker.model import MessageInput, NewMessage, ProducerStamp
from cirrusmq_broker.rules.transaction_state import Resolution, TxnState
from cirrusmq_broker.services.batch_reader import COUNT_MISMATCH
from cirrusmq_broker.services.batch_writer import FRESH, content_named, encode, fixed_name
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.storage.batch_objects import REUSE_EXISTING_OBJECT_SECONDS, TopicObjectTaken
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.producers import ProducerRecord


@pytest.fixture
def delays(settings, clock, monkeypatch) -> Broker:
    monkeypatch.setattr(release, "MOVE_WORKERS", 1)  # in-process moto: one thread
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TimersTable" in t)
    return Broker(dataclasses.replace(settings, timers_table=table), clock)


@contextmanager
def throttled(operation: str, times: int = 1) -> Iterator[list[int]]:
    """The next ``times`` calls of ``operation`` fail as throttled (before they are made);
    yields a one-item list counting the failures injected."""
    failed = [0]

    def observer(service: str, name: str, _: object) -> None:
        if name == operation and failed[0] < times:
            failed[0] += 1
            raise Throttled(f"injected: {operation} throttled")

    remove = observe_calls(observer)
    try:
        yield failed
    finally:
        remove()


def drain(broker: Broker, group: str, topic: str) -> list[bytes]:
    """Every body the group can receive now (acked at once)."""
    bodies: list[bytes] = []
    while True:
        got = broker.consume.receive(group, topic, max_messages=32)
        if not got:
            return bodies
        bodies += [m.message.body for m in got]
        broker.consume.ack(group, [m.receipt_handle for m in got])


def test_send_retried_after_its_delay_passed_stores_every_message(delays, clock):
    """The first attempt split [x, y] into x now and y delayed, wrote both objects and its
    commit was throttled; the retry, 3 s later, appends x and y at once."""
    delays.admin.create_topic("t", queues=1)
    stamp = ProducerStamp("p1", 1)
    inputs = [
        MessageInput(b"x", message_id="x"),
        MessageInput(b"y", message_id="y", delivery_timestamp=clock.now + 2000),
    ]
    with throttled("TransactWriteItems") as failed, pytest.raises(Throttled):
        delays.produce.send("t", inputs, stamp)
    assert failed == [1]
    clock.advance(3)
    result = delays.produce.send("t", inputs, stamp)
    assert not result.duplicate
    assert [r.offset for r in result.receipts] == [0, 1]
    send(delays, "t", b"z")
    assert drain(delays, "g", "t") == [b"x", b"y", b"z"]


def test_cancel_during_a_prepared_move_is_honoured_and_loses_nothing(delays, clock):
    """The loop prepares a move up to 150 ms early; a cancel lands before its commit,
    which is refused. The next tick moves only what is left, in an object of its own."""
    delays.admin.create_topic("t", queues=1)
    due = (clock.now // 1000 + 10) * 1000
    for name in ("m1", "m2"):  # two sends: two timer items due in the same second
        message = MessageInput(name.encode(), message_id=name, delivery_timestamp=due)
        delays.produce.send("t", [message])
    clock.now = due - 100  # within PREPARE_MS: the object is written, then the loop waits

    def cancel_then_wake(at: int) -> None:
        delays.delay_cancel.cancel("t", "m1", due)
        clock.now = max(clock.now, at)

    assert delays.delay_release.tick(sleep_until=cancel_then_wake).moved == 0  # refused
    assert delays.delay_release.tick().moved == 1
    send(delays, "t", b"m3")
    assert drain(delays, "g", "t") == [b"m2", b"m3"]


def test_expiry_move_rerun_after_an_ack_moves_only_what_is_left(broker, clock):
    """A lease of [a, b] expires; its move to the retry topic is throttled at the commit;
    the consumer acks a; the next receive moves b alone. A later move to the same retry
    queue (c, nacked) is delivered too."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    handles = {
        m.message.body: m.receipt_handle
        for m in broker.consume.receive("g", "t", invisible_seconds=10, max_messages=2)
    }
    clock.advance(10)
    # the receive may answer 429; the next receive re-runs the move
    with throttled("TransactWriteItems") as failed, contextlib.suppress(Throttled):
        broker.consume.receive("g", "t", max_messages=2)
    assert failed == [1]
    [a_status] = ack_statuses(broker, "g", [handles[b"a"]])
    broker.consume.receive("g", "t", max_messages=2)  # re-runs the move (b)
    send(broker, "t", b"c")
    [c] = broker.consume.receive("g", "t", max_messages=1)
    assert c.message.body == b"c"
    broker.retries.nack("g", [c.receipt_handle])  # moves c to the same retry queue
    clock.advance(10)
    expected = [b"b", b"c"] if a_status == "acked" else [b"a", b"b", b"c"]
    assert sorted(drain(broker, "g", "t")) == expected


# ------------------------------------------------------------- the reader verifies
def corrupt_batch(broker: Broker, topic: str, bodies: list[bytes], count: int) -> None:
    """Append an object holding ``bodies`` under an index item that claims ``count`` rows
    (what a writer trusting a name over its content could do)."""
    target = broker.catalog.active(topic)
    messages = [NewMessage(f"id-{b.decode()}", b, born_timestamp=1) for b in bodies]
    writer = broker.produce._writer
    batch = dataclasses.replace(
        encode(target, 0, messages, stored_timestamp=broker.clock()), count=count
    )
    written = writer.write(batch, FRESH)
    writer.append(
        [written],
        stamp=None,
        build_record=lambda bases: ProducerRecord("", bases),
        expires_at=broker.clock() // 1000 + 3600,
        record_expires_at=0,
    )


@pytest.mark.parametrize(
    ("stored", "count", "expected"),
    [
        # rows beyond the count never shadow the next batch's offsets
        ([b"a", b"b", b"x"], 2, [(0, b"a"), (1, b"b"), (2, b"c")]),
        # a missing row is a missing offset; later offsets never shift
        ([b"a"], 2, [(0, b"a"), (2, b"c")]),
    ],
)
def test_a_batch_whose_rows_differ_from_its_count_is_read_as_indexed_and_reported(
    broker, caplog, stored, count, expected
):
    broker.admin.create_topic("t", queues=1)
    corrupt_batch(broker, "t", stored, count)
    send(broker, "t", b"c")
    with caplog.at_level(logging.ERROR):
        pulled = broker.log_reader.read("t", 0, 0, max_messages=10)
        received = broker.consume.receive("g", "t", max_messages=10)
    assert [(m.offset, m.body) for m in pulled.messages] == expected
    assert [(m.message.offset, m.message.body) for m in received] == expected
    reports = [r for r in caplog.records if r.getMessage().startswith(COUNT_MISMATCH)]
    assert reports, "a count mismatch is reported"
    fields = json.loads(reports[0].getMessage().split(" ", 1)[1])
    assert (fields["indexed_count"], fields["object_rows"]) == (count, len(stored))
    assert (fields["topic"], fields["queue"], fields["base_offset"]) == ("t", 0, 0)


def test_a_spark_slice_of_a_mismatched_batch_is_reported_and_cut_to_its_count(caplog):
    import io

    import pyarrow.parquet as pq
    from cirrusmq.spark.planning import Slice
    from cirrusmq.spark.rows import COUNT_MISMATCH as SPARK_MISMATCH
    from cirrusmq.spark.rows import slice_rows
    from cirrusmq_broker.codec import encode_batch

    messages = [NewMessage(f"m{i}", b"x", born_timestamp=1) for i in range(3)]
    table = pq.read_table(io.BytesIO(encode_batch(messages, stored_timestamp=1, stamp=None)))
    with caplog.at_level(logging.ERROR):
        rows = slice_rows(table, "t", Slice(0, "k", 10, 10, 12, 0, count=2))
    assert rows.column("offset").to_pylist() == [10, 11]
    assert rows.column("message_id").to_pylist() == ["m0", "m1"]
    assert SPARK_MISMATCH == COUNT_MISMATCH
    assert any(r.getMessage().startswith(COUNT_MISMATCH) for r in caplog.records)


def test_a_stamped_send_costs_one_object_and_three_plain_writes(broker):
    """Its claim, its index item, its head: 3 write units, where one transaction of the
    three items would cost 6."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"warm")  # the tail is read once per container
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(f"{service}.{operation}"))
    try:
        broker.produce.send("t", [MessageInput(b"m")] * 100, ProducerStamp("p1", 1))
    finally:
        remove()
    assert sorted(seen) == [
        "dynamodb.PutItem",
        "dynamodb.PutItem",
        "dynamodb.UpdateItem",
        "s3.PutObject",
    ]


# ------------------------------------------------------------- naming of the one path
def test_content_named_objects_are_reused_only_for_the_same_bytes(broker, clock):
    broker.admin.create_topic("t", queues=1)
    topic = broker.catalog.active("t")
    writer = broker.produce._writer

    def written(*bodies: bytes):
        messages = [NewMessage(b.decode(), b, born_timestamp=1) for b in bodies]
        batch = encode(topic, 0, messages, stored_timestamp=clock.now)
        return writer.write(batch, content_named("move-"))

    first, again, other = written(b"a", b"b"), written(b"a", b"b"), written(b"b")
    assert first.object_key == again.object_key and not again.own
    assert other.object_key != first.object_key and other.pending.count == 1


def test_a_fixed_name_holding_other_bytes_is_never_reused(broker, clock):
    broker.admin.create_topic("t", queues=1)
    topic = broker.catalog.active("t")
    writer = broker.produce._writer
    batch = encode(topic, 0, [NewMessage("a", b"a", born_timestamp=1)], stored_timestamp=clock.now)
    assert writer.write(batch, fixed_name("txn-x")).object_key.endswith("/txn-x.parquet")
    assert writer.write(batch, fixed_name("txn-x")).own is False  # identical: reused
    changed = dataclasses.replace(batch, data=batch.data + b"?")
    with pytest.raises(TopicObjectTaken):
        writer.write(changed, fixed_name("txn-x"))


def test_an_object_old_enough_for_the_sweeper_is_written_again_under_a_fresh_name(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    topic = broker.catalog.active("t")
    writer = broker.produce._writer
    batch = encode(topic, 0, [NewMessage("a", b"a", born_timestamp=1)], stored_timestamp=clock.now)
    first = writer.write(batch, content_named("p-"))
    monkeypatch.setattr(
        type(broker.objects), "age_seconds", lambda self, key: REUSE_EXISTING_OBJECT_SECONDS
    )
    again = writer.write(batch, content_named("p-"))
    assert again.own and again.object_key != first.object_key


@pytest.fixture
def b(settings, clock) -> Broker:
    """A broker with a transactional topic ``pay`` of one queue."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TransactionsTable" in t)
    broker = Broker(dataclasses.replace(settings, transactions_table=table), clock)
    broker.admin.create_topic("pay", queues=1, message_type="TRANSACTION")
    return broker


def visible(broker: Broker, topic: str = "pay", group: str = "g") -> list[bytes]:
    got: list[bytes] = []
    while batch := broker.consume.receive(group, topic, max_messages=100):
        got += [m.message.body for m in batch]
        broker.consume.ack(group, [m.receipt_handle for m in batch])
    return sorted(got)


def test_an_interrupted_merged_commit_completes_after_an_encoder_change(b, clock):
    b.transactions.register("pg", "p1")
    for part, body in enumerate((b"a", b"b")):  # two sends, one queue: a merged object
        b.transactions.send(
            "pg",
            "tx",
            transactional_id="p1",
            epoch=1,
            topic_name="pay",
            inputs=[MessageInput(body)],
            part=part,
        )
    writer = b.transactions._writer
    real = writer.append

    def crash(*args, **kwargs):
        raise RuntimeError("the Lambda died after writing the commit object")

    writer.append = crash
    with pytest.raises(RuntimeError):
        b.transactions.end("pg", "tx", Resolution.COMMIT, producer=("p1", 1))
    writer.append = real
    [key] = [k for k in object_keys(b) if k.startswith("topics/topic=pay/")]
    s3 = boto3.client("s3", region_name="us-east-1")
    bucket = b.settings.bucket
    table = pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))
    sink = io.BytesIO()  # the same rows as the previous layer's writer encoded them
    pq.write_table(table, sink, compression="snappy")
    s3.put_object(Bucket=bucket, Key=key, Body=sink.getvalue())
    clock.advance(61)  # the checker resumes the commit
    b.transactions.run_checks()
    assert b.transactions._store.get("pg", "tx").state is TxnState.COMMITTED
    assert visible(b) == [b"a", b"b"]
