"""Scenarios of the core-hardening review: each failed on the code before the fix.

Retention edges (offsets after every index item expired, groups behind expired batches),
idempotent acks, one subscription per group and topic, refused sends that leave nothing
behind, sends racing a topic delete, and the AWS calls a produce and a poll cost.
"""

from __future__ import annotations

from collections import Counter

import boto3
import pytest
from broker_helpers import (
    ack_statuses,
    create_fifo_topic,
    index_items,
    object_keys,
    send,
    statuses,
)
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import IdempotencyConflict, SubscriptionConflict, TopicNotFound
from cirrusmq_broker.model import ProducerStamp
from cirrusmq_broker.services.delivery.queue_plan import FLOW_RECHECK_SECONDS
from cirrusmq_broker.services.produce import MessageInput
from cirrusmq_broker.storage.clients import observe_calls


def expire_index_items(broker: Broker) -> None:
    """What DynamoDB's TTL does eventually: every expired index item is deleted."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    for item in index_items(broker):
        key = {k: item[k] for k in ("stream", "base_offset")}
        ddb.delete_item(TableName=broker.settings.log_index_table, Key=key)


def count_calls() -> tuple[Counter, callable]:
    calls: Counter = Counter()
    remove = observe_calls(lambda service, operation, _: calls.update([f"{service}.{operation}"]))
    return calls, remove


def test_offsets_never_go_back_after_every_index_item_expired(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    send(broker, "t", *[b"old"] * 10)
    got = broker.consume.receive("g", "t", max_messages=10)
    assert ack_statuses(broker, "g", [m.receipt_handle for m in got]) == ["acked"] * 10
    clock.advance(2 * 3600)
    expire_index_items(broker)
    cold = Broker(broker.settings, clock)  # a new container: no cached tail
    [receipt] = send(cold, "t", b"new")
    assert receipt.offset == 10
    [status] = statuses(cold, "g")
    assert status.lag == 1
    assert [m.message.body for m in cold.consume.receive("g", "t")] == [b"new"]


def test_a_new_group_on_a_queue_whose_data_expired_polls_idle(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    send(broker, "t", b"old", b"old")
    clock.advance(2 * 3600)
    expire_index_items(broker)
    assert broker.consume.receive("g", "t") == []  # moves the new group's cursor to the head
    calls, remove = count_calls()
    try:
        assert broker.consume.receive("g", "t") == []
    finally:
        remove()
    assert calls == Counter({"dynamodb.BatchGetItem": 1})


def test_receive_gets_past_any_number_of_expired_batches_and_saves_the_skip(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    for _ in range(150):  # 150 batches: more than one page of the index
        send(broker, "t", b"old")
    clock.advance(2 * 3600)  # expired, but TTL has not deleted them yet
    send(broker, "t", b"live-1", b"live-2")
    calls, remove = count_calls()
    try:
        got = broker.consume.receive("g", "t", max_messages=10)
    finally:
        remove()
    assert [m.message.body for m in got] == [b"live-1", b"live-2"]
    assert calls["dynamodb.Query"] <= 12  # a binary search, not a page per 100 batches
    [status] = statuses(broker, "g")
    assert status.cursor == 152 and status.committed_offset == 150  # the skip is stored
    calls, remove = count_calls()
    try:
        assert broker.consume.receive("g", "t") == []
    finally:
        remove()
    assert calls["dynamodb.Query"] == 0  # an idle poll: one batched read, no query


def test_ack_of_an_acked_message_succeeds_after_compaction(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    send(broker, "t", b"b")
    [a] = broker.consume.receive("g", "t", max_messages=1)
    [b] = broker.consume.receive("g", "t", max_messages=1)
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]
    send(broker, "t", b"c")
    broker.consume.receive("g", "t", max_messages=1)  # compacts: b's lease is dropped
    assert ack_statuses(broker, "g", [b.receipt_handle, a.receipt_handle]) == ["acked", "acked"]
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]


def test_a_group_member_with_another_filter_is_refused(broker):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", tag="A")
    broker.consume.receive("g", "t", filter_expression="A || B")
    assert broker.consume.receive("g", "t", filter_expression="B||A") == []  # same filter
    with pytest.raises(SubscriptionConflict) as err:
        broker.consume.receive("g", "t", filter_expression="C")
    assert err.value.details == {"topic": "t", "subscribed": "A || B", "requested": "C"}
    assert broker.consume.subscribe("g", "t", "C") == "C"
    send(broker, "t", b"y", tag="C")
    assert [m.message.body for m in broker.consume.receive("g", "t", filter_expression="C")] == [
        b"y"
    ]
    assert broker.consume.describe_group("g").subscriptions == {"t": "C"}


def test_an_idempotency_conflict_stores_nothing(broker):
    broker.admin.create_topic("t", queues=2)
    stamp = ProducerStamp("p", 7)
    broker.produce.send("t", [MessageInput(b"first")], stamp)
    before = sorted(object_keys(broker))
    with pytest.raises(IdempotencyConflict):
        broker.produce.send("t", [MessageInput(b"other")], stamp)
    assert sorted(object_keys(broker)) == before
    assert broker.produce.send("t", [MessageInput(b"first")], stamp).duplicate
    assert sorted(object_keys(broker)) == before


def test_a_send_after_the_topic_was_deleted_is_refused_not_purged(broker, clock):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"before")  # this container now caches the topic as active
    other = Broker(broker.settings, clock)
    other.admin.delete_topic("t")
    items, objects = len(index_items(broker)), len(object_keys(broker))
    with pytest.raises(TopicNotFound):
        send(broker, "t", b"after")
    assert (len(index_items(broker)), len(object_keys(broker))) == (items, objects)


def test_a_produce_costs_one_put_and_one_transaction_whatever_its_size(broker):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"warm")  # the head is read once per container
    calls, remove = count_calls()
    try:
        send(broker, "t", *[b"m"] * 500)
    finally:
        remove()
    assert calls == Counter({"s3.PutObject": 1, "dynamodb.TransactWriteItems": 1})


def test_lookup_by_a_time_carrying_id(broker):
    from cirrusmq.message import new_message_id

    broker.admin.create_topic("t", queues=4)
    ids = [new_message_id() for _ in range(3)]
    broker.produce.send("t", [MessageInput(b"m%d" % i, message_id=i_) for i, i_ in enumerate(ids)])
    assert broker.lookup.lookup("t", ids[2]).body == b"m2"
    stamped = broker.produce.send("t", [MessageInput(b"s")], ProducerStamp("p", 1)).receipts[0]
    assert broker.lookup.lookup("t", stamped.message_id).body == b"s"


def test_describe_shows_what_holds_the_committed_offset(broker, clock):
    create_fifo_topic(broker, "t")  # in place (elsewhere an expired lease moves to retry)
    send(broker, "t", b"a", b"b", message_group="k")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    ack_statuses(broker, "g", [b.receipt_handle])
    clock.advance(11)
    broker.consume.receive("g", "t", invisible_seconds=10)  # a again: attempt 2
    [status] = statuses(broker, "g")
    assert (status.oldest_unacked_offset, status.oldest_unacked_attempt) == (a.message.offset, 2)


def test_a_queue_at_its_flow_control_limit_delivers_again_once_acked(broker, clock, monkeypatch):
    from cirrusmq_broker import limits

    monkeypatch.setattr(limits, "MAX_LEASES_PER_QUEUE", 3)
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"1", b"2", b"3", b"4")
    held = [broker.consume.receive("g", "t", max_messages=1)[0] for _ in range(3)]
    assert broker.consume.receive("g", "t") == []  # 3 leases: the queue waits for acks
    assert ack_statuses(broker, "g", [m.receipt_handle for m in held]) == ["acked"] * 3
    clock.advance(FLOW_RECHECK_SECONDS)  # a queue at its limit is re-checked this often
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"4"]


def test_a_batch_from_a_producer_with_a_fast_clock_is_not_skipped(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    for _ in range(120):
        send(broker, "t", b"old")
    fast = Broker(broker.settings, lambda: clock() + 10_000)  # its clock runs 10 s ahead
    send(fast, "t", b"still retained")
    for _ in range(20):
        send(broker, "t", b"old")
    clock.advance(3600 + 5)  # the fast producer's batch has 5 s of retention left
    got = []
    for _ in range(20):  # each poll gets further (bounded work per call) and stores that
        got += broker.consume.receive("g", "t", max_messages=10)
        if got:
            break
    assert [m.message.body for m in got] == [b"still retained"]


def test_a_filter_is_bounded(broker):
    from cirrusmq_broker.errors import InvalidFilterExpression

    broker.admin.create_topic("t", queues=1)
    for expression in ["A" * 200, " || ".join(f"T{i}" for i in range(100)), "x" * 800_000]:
        with pytest.raises(InvalidFilterExpression):
            broker.consume.receive("g", "t", filter_expression=expression)
