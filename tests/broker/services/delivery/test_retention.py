"""Delivery at the retention edges, on in-process moto with a fake clock: offsets after every
index item expired, groups behind expired batches, batches of producers whose clocks differ."""

from __future__ import annotations

from collections import Counter

import boto3
from broker_helpers import ack_statuses, count_calls, index_items, send, statuses
from cirrusmq_broker.container import Broker


def expire_index_items(broker: Broker) -> None:
    """What DynamoDB's TTL does eventually: every expired index item is deleted."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    for item in index_items(broker):
        key = {k: item[k] for k in ("stream", "base_offset")}
        ddb.delete_item(TableName=broker.settings.log_index_table, Key=key)


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


def test_index_entries_past_retention_are_not_delivered(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    send(broker, "t", b"old")
    clock.advance(3601)
    send(broker, "t", b"new")
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"new"]
