"""Message trace: one write per request for traced topics, none for the others, and a
message's events read back in time order."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import boto3
import pytest
from broker_helpers import object_keys
from cirrusmq_broker.clock import wall_ms
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import MessageNotFound
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.retries import REDRIVE_QUEUE
from cirrusmq_broker.rules.transaction_state import Resolution
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.services.trace import TraceRecorder, request_scope
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.trace_objects import (
    TRACE_PREFIX,
    TraceObjectStore,
    may_concern,
    object_key,
)
from ulid import ULID


@pytest.fixture(autouse=True)
def clock_at_wall_time(clock) -> None:  # noqa: ANN001
    """Message ids (ULIDs) carry the wall time: the broker's clock agrees, as on AWS."""
    clock.now = wall_ms()


@contextmanager
def trace_puts() -> Iterator[list[str]]:
    """Keys of the trace objects written (one S3 PutObject each) while inside."""
    keys: list[str] = []

    def observe(service: str, operation: str, params: dict) -> None:
        if operation == "PutObject" and str(params.get("Key", "")).startswith(TRACE_PREFIX):
            keys.append(params["Key"])

    remove = observe_calls(observe)
    try:
        yield keys
    finally:
        remove()


def in_request(broker: Broker, action):  # noqa: ANN001, ANN201
    with broker.trace.request():
        return action()


def send(broker: Broker, topic: str, count: int) -> list:
    bodies = [MessageInput(f"m{i}".encode()) for i in range(count)]
    return in_request(broker, lambda: broker.produce.send(topic, bodies)).receipts


def test_a_send_of_many_messages_to_a_traced_topic_makes_one_trace_write(broker: Broker) -> None:
    broker.admin.create_topic("orders", queues=4, trace=True)
    with trace_puts() as puts:
        receipts = send(broker, "orders", 50)
    assert len(puts) == 1
    events = broker.trace_reader.trace_message("orders", receipts[17].message_id)
    assert [e["kind"] for e in events] == ["sent"]
    assert events[0]["queue"] == receipts[17].queue
    assert events[0]["offset"] == receipts[17].offset


def test_an_untraced_topic_makes_no_trace_write_nor_any_other_extra_call(broker: Broker) -> None:
    broker.admin.create_topic("plain", queues=2)
    calls: list[str] = []
    remove = observe_calls(lambda service, operation, params: calls.append(operation))
    try:
        send(broker, "plain", 1)  # warms the topic cache and queue tails
        calls.clear()
        with trace_puts() as puts:
            send(broker, "plain", 20)
            received = in_request(
                broker, lambda: broker.consume.receive("g", "plain", max_messages=20)
            )
            in_request(
                broker, lambda: broker.consume.ack("g", [r.receipt_handle for r in received])
            )
        untraced_calls = list(calls)
    finally:
        remove()
    assert puts == []
    assert broker.trace.writes == 0
    assert "ListObjectsV2" not in untraced_calls


def test_a_receive_and_an_ack_of_many_messages_make_one_trace_write_each(broker: Broker) -> None:
    broker.admin.create_topic("orders", queues=2, trace=True)
    receipts = send(broker, "orders", 30)
    with trace_puts() as puts:
        received = in_request(
            broker, lambda: broker.consume.receive("g", "orders", max_messages=30, client_id="c1")
        )
    assert len(received) == 30 and len(puts) == 1
    with trace_puts() as puts:
        in_request(broker, lambda: broker.consume.ack("g", [r.receipt_handle for r in received]))
    assert len(puts) == 1
    events = broker.trace_reader.trace_message("orders", receipts[5].message_id)
    assert [e["kind"] for e in events] == ["sent", "delivered", "acked"]
    delivered = events[1]
    assert delivered["group"] == "g" and delivered["client_id"] == "c1"
    assert delivered["attempt"] == 1 and delivered["invisible_until"] > delivered["time"]


def test_a_nack_and_a_redelivery_are_traced_to_the_ack(broker: Broker, clock) -> None:  # noqa: ANN001
    broker.admin.create_topic("orders", queues=1, trace=True)
    [receipt] = send(broker, "orders", 1)
    [first] = in_request(broker, lambda: broker.consume.receive("g", "orders"))
    clock.advance(1)
    in_request(broker, lambda: broker.retries.nack("g", [first.receipt_handle], 0))
    clock.advance(30)
    [second] = in_request(broker, lambda: broker.consume.receive("g", "orders"))
    clock.advance(1)
    in_request(broker, lambda: broker.consume.ack("g", [second.receipt_handle]))
    events = broker.trace_reader.trace_message("orders", receipt.message_id)
    kinds = [(e["kind"], e.get("attempt")) for e in events]
    assert kinds == [
        ("sent", None),
        ("delivered", 1),
        ("nacked", 1),
        ("moved_to_retry", 1),
        ("delivered", 2),
        ("acked", 2),
    ]
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)


def test_the_events_of_one_request_share_its_time_and_sort_by_kind(
    broker: Broker,
    clock,  # noqa: ANN001
) -> None:
    """A nack records ``moved_to_retry`` (during the move) before ``nacked`` (after it): the
    clock moving between the two must not put the move before the nack."""
    broker.admin.create_topic("orders", queues=1, trace=True)
    [receipt] = send(broker, "orders", 1)
    [first] = in_request(broker, lambda: broker.consume.receive("g", "orders"))
    ticks = iter(range(clock.now, clock.now + 1000))
    ticking = TraceRecorder(
        TraceObjectStore(boto3.client("s3"), broker.settings.bucket), lambda: next(ticks)
    )
    with request_scope(lambda: ticking):
        broker.retries.nack("g", [first.receipt_handle], 0)
    events = broker.trace_reader.trace_message("orders", receipt.message_id)
    assert [e["kind"] for e in events] == ["sent", "delivered", "nacked", "moved_to_retry"]
    assert events[2]["time"] == events[3]["time"]


def test_a_failed_trace_write_never_fails_the_request(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("S3 is down")

    monkeypatch.setattr(broker.trace._store, "put", broken)
    receipts = send(broker, "orders", 3)
    assert len(receipts) == 3 and broker.trace.write_errors == 1
    assert not [k for k in object_keys(broker) if k.startswith(TRACE_PREFIX)]


def test_trace_can_be_turned_on_later_and_off_again(broker: Broker) -> None:
    broker.admin.create_topic("orders", queues=1)
    assert broker.admin.update_topic("orders", trace=True).trace is True
    assert broker.admin.describe_topic("orders").topic.trace is True
    [receipt] = send(broker, "orders", 1)
    assert broker.admin.update_topic("orders", trace=False).trace is False
    send(broker, "orders", 1)
    assert broker.trace.writes == 1
    assert broker.trace_reader.trace_message("orders", receipt.message_id)[0]["kind"] == "sent"


def test_a_message_without_events_is_not_found(broker: Broker) -> None:
    broker.admin.create_topic("orders", queues=1)
    [receipt] = send(broker, "orders", 1)
    with pytest.raises(MessageNotFound):
        broker.trace_reader.trace_message("orders", receipt.message_id)


def test_object_names_let_a_lookup_skip_other_topics() -> None:
    key = object_key("01J0000000000000000000000", 1_790_000_000_000, ["a", "b"])
    assert key.startswith("trace/dt=2026-09-21/hour=")
    assert may_concern(key, "a") and may_concern(key, "b") and not may_concern(key, "c")
    many = object_key("01J0000000000000000000000", 0, [f"t{i}" for i in range(9)])
    assert ".all.parquet" in many and may_concern(many, "anything")


def test_an_expired_lease_is_traced_as_expired_then_moved_to_retry(broker: Broker, clock) -> None:  # noqa: ANN001
    broker.admin.create_topic("orders", queues=1, trace=True)
    [receipt] = send(broker, "orders", 1)
    in_request(broker, lambda: broker.consume.receive("g", "orders", invisible_seconds=10))
    clock.advance(11)
    with trace_puts() as puts:  # this receive expires the lease and moves the message on
        in_request(broker, lambda: broker.consume.receive("g", "orders"))
    assert len(puts) == 1
    kinds = [e["kind"] for e in broker.trace_reader.trace_message("orders", receipt.message_id)]
    assert kinds == ["sent", "delivered", "expired", "moved_to_retry"]


def test_a_delayed_message_is_traced_scheduled_then_released(
    settings,
    clock,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    monkeypatch.setattr(release, "MOVE_WORKERS", 1)  # in-process moto is not thread-safe
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TimersTable" in t)
    broker = Broker(dataclasses.replace(settings, timers_table=table), clock)
    broker.admin.create_topic("orders", queues=1, trace=True)
    later = [MessageInput(f"m{i}".encode(), delay_level=1) for i in range(5)]
    receipts = in_request(broker, lambda: broker.produce.send("orders", later)).receipts
    clock.advance(2)
    with trace_puts() as puts:
        assert broker.delay_release.tick().moved == 5
    assert len(puts) == 1  # one move of five messages: one trace write
    events = broker.trace_reader.trace_message("orders", receipts[3].message_id)
    assert [e["kind"] for e in events] == ["scheduled", "released"]
    assert events[0]["delivery_timestamp"] == receipts[3].delivery_timestamp
    assert events[1]["offset"] == 3


@pytest.fixture
def txn_broker(settings, clock) -> Broker:  # noqa: ANN001
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TransactionsTable" in t)
    broker = Broker(dataclasses.replace(settings, transactions_table=table), clock)
    broker.admin.create_topic("pay", queues=2, message_type="TRANSACTION", trace=True)
    broker.transactions.register("pg", "p1")
    return broker


def half_send(broker: Broker, txid: str, *message_ids: str) -> None:
    inputs = [MessageInput(b"x", message_id=m) for m in message_ids]
    in_request(
        broker,
        lambda: broker.transactions.send(
            "pg", txid, transactional_id="p1", epoch=1, topic_name="pay", inputs=inputs
        ),
    )


@pytest.mark.parametrize(
    ("resolution", "kind"), [(Resolution.COMMIT, "committed"), (Resolution.ROLLBACK, "rolled_back")]
)
def test_a_transaction_s_end_is_traced_for_each_of_its_messages(
    txn_broker: Broker, resolution: Resolution, kind: str
) -> None:
    ids = [str(ULID()) for _ in range(3)]
    half_send(txn_broker, "tx1", *ids)
    with trace_puts() as puts:
        in_request(
            txn_broker,
            lambda: txn_broker.transactions.end("pg", "tx1", resolution, producer=("p1", 1)),
        )
    assert len(puts) == 1
    for message_id in ids:
        events = txn_broker.trace_reader.trace_message("pay", message_id)
        assert [e["kind"] for e in events] == ["sent", kind]
        assert {e["transaction_id"] for e in events} == {"tx1"}


def test_an_ack_of_an_untraced_topic_costs_the_same_calls_with_a_trace_scope_open(
    broker: Broker,
) -> None:
    """An ack never reads the topic; the trace does not make it (the flag comes from the
    topic cached by the request that read it, never from a read of its own)."""
    broker.admin.create_topic("plain", queues=1)
    send(broker, "plain", 2)
    seen: list[list[str]] = []
    for scoped in (False, True):  # each lease stored alike: on the summary
        batch = broker.consume.receive("g", "plain", max_messages=1)
        broker.catalog.forget("plain")  # as in a container that did not serve the receive
        handle = batch[0].receipt_handle
        calls: list[str] = []
        remove = observe_calls(
            lambda service, operation, params, into=calls: into.append(operation)
        )
        try:
            if scoped:
                in_request(broker, lambda h=handle: broker.consume.ack("g", [h]))
            else:
                broker.consume.ack("g", [handle])
        finally:
            remove()
        seen.append(sorted(calls))
    assert seen[0] == seen[1] and "GetItem" not in seen[1]


def test_a_dead_letter_and_its_redrive_are_traced(broker: Broker, clock) -> None:  # noqa: ANN001
    broker.admin.create_topic("orders", queues=1, trace=True)
    broker.retries.set_max_delivery_attempts("g", 1)
    [receipt] = send(broker, "orders", 1)
    [got] = in_request(broker, lambda: broker.consume.receive("g", "orders"))
    in_request(broker, lambda: broker.retries.nack("g", [got.receipt_handle]))
    clock.advance(1)
    with trace_puts() as puts:
        redrive = in_request(broker, lambda: broker.dead_letters.redrive("g"))
    assert redrive.redriven == 1 and len(puts) == 1
    events = broker.trace_reader.trace_message("orders", receipt.message_id)
    assert [e["kind"] for e in events] == [
        "sent",
        "delivered",
        "nacked",
        "dead_lettered",
        "redriven",
    ]
    assert events[3]["target_topic"] == "dlq.g" and "negatively acknowledged" in events[3]["reason"]
    assert events[4]["group"] == "g" and events[4]["target_topic"] == "retry.g.orders"
    # where the copy was stored: the group's retry topic's redrive queue
    assert (events[4]["queue"], events[4]["offset"]) == (REDRIVE_QUEUE, 0)
