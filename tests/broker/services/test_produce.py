"""Produce on in-process moto: routing, one object + one index item per queue, idempotency,
refused sends that store nothing, the AWS calls a produce costs."""

from __future__ import annotations

from collections import Counter

import pytest
from broker_helpers import count_calls, index_items, object_keys, send
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import (
    IdempotencyConflict,
    InvalidMessage,
    MessageGroupRequired,
    MessageTooLarge,
    TooManyMessages,
    TopicNotFound,
)
from cirrusmq_broker.limits import MAX_BODY_BYTES
from cirrusmq_broker.model import MessageInput, ProducerStamp
from cirrusmq_broker.storage.appends import BatchAppender


def test_ungrouped_batch_goes_to_one_queue_as_one_object(broker):
    broker.admin.create_topic("t", queues=4)
    receipts = send(broker, "t", b"a", b"b", b"c")
    assert len({r.queue for r in receipts}) == 1
    assert [r.offset for r in receipts] == [0, 1, 2]
    assert len(object_keys(broker)) == 1 and len(index_items(broker)) == 1
    key = object_keys(broker)[0]
    assert key.startswith(f"topics/topic=t/queue={receipts[0].queue}/dt=") and key.endswith(
        ".parquet"
    )


def test_message_groups_route_by_hash_one_object_per_queue(broker):
    broker.admin.create_topic("t", queues=4)
    inputs = [MessageInput(b"x", message_group=f"g{i % 3}") for i in range(9)]
    receipts = broker.produce.send("t", inputs).receipts
    by_group: dict[str, set[int]] = {}
    for message, receipt in zip(inputs, receipts, strict=True):
        by_group.setdefault(message.message_group, set()).add(receipt.queue)
    assert all(len(queues) == 1 for queues in by_group.values())
    queues = {r.queue for r in receipts}
    assert len(object_keys(broker)) == len(queues) == len(index_items(broker))
    again = broker.produce.send("t", [MessageInput(b"y", message_group="g1")]).receipts
    assert again[0].queue == next(iter(by_group["g1"]))


def test_offsets_stay_contiguous_when_two_containers_race(settings, clock):
    first, second = Broker(settings, clock), Broker(settings, clock)
    first.admin.create_topic("t", queues=1)
    offsets = []
    for i in range(6):  # alternate: each container's cached tail is stale every other time
        producer = first if i % 2 == 0 else second
        offsets += [r.offset for r in send(producer, "t", b"m1", b"m2")]
    assert offsets == list(range(12))


def test_retry_with_same_stamp_returns_original_receipts_and_stores_nothing(broker):
    broker.admin.create_topic("t", queues=4)
    inputs = [MessageInput(b"a"), MessageInput(b"b", message_id="mine")]
    stamp = ProducerStamp("producer-1", 5)
    first = broker.produce.send("t", inputs, stamp)
    keys_before, items_before = object_keys(broker), index_items(broker)

    retry = broker.produce.send("t", inputs, stamp)

    assert retry.duplicate and not first.duplicate
    assert retry.receipts == first.receipts
    assert object_keys(broker) == keys_before and index_items(broker) == items_before


def test_same_stamp_with_other_payload_is_a_conflict(broker):
    broker.admin.create_topic("t")
    broker.produce.send("t", [MessageInput(b"a")], ProducerStamp("p", 1))
    with pytest.raises(IdempotencyConflict):
        broker.produce.send("t", [MessageInput(b"other")], ProducerStamp("p", 1))


@pytest.mark.parametrize(
    ("inputs", "error"),
    [
        ([], TooManyMessages),
        ([MessageInput(b"x")] * 1001, TooManyMessages),
        ([MessageInput(b"")], InvalidMessage),
        ([MessageInput(b"x" * (MAX_BODY_BYTES + 1))], MessageTooLarge),
        ([MessageInput(b"x", tag="a b")], InvalidMessage),
        ([MessageInput(b"x", tag="a||b")], InvalidMessage),
        ([MessageInput(b"x", message_id="bad id")], InvalidMessage),
        ([MessageInput(b"x", message_id="d"), MessageInput(b"y", message_id="d")], InvalidMessage),
        ([MessageInput(b"x", properties={"": "v"})], InvalidMessage),
    ],
)
def test_bad_input_stores_nothing(broker, inputs, error):
    broker.admin.create_topic("t")
    with pytest.raises(error):
        broker.produce.send("t", inputs)
    assert object_keys(broker) == [] and index_items(broker) == []


def test_fifo_topic_requires_message_group(broker):
    broker.admin.create_topic("f", message_type="FIFO")
    with pytest.raises(MessageGroupRequired):
        broker.produce.send("f", [MessageInput(b"x")])
    assert broker.produce.send("f", [MessageInput(b"x", message_group="g")]).receipts


def test_unknown_topic(broker):
    with pytest.raises(TopicNotFound):
        broker.produce.send("nope", [MessageInput(b"x")])


def test_same_stamp_on_another_topic_is_a_conflict(broker):
    broker.admin.create_topic("t1")
    broker.admin.create_topic("t2")
    broker.produce.send("t1", [MessageInput(b"a")], ProducerStamp("p", 1))
    with pytest.raises(IdempotencyConflict):
        broker.produce.send("t2", [MessageInput(b"a")], ProducerStamp("p", 1))


def test_idempotency_records_are_per_access_key(broker):
    """Another key that learnt a producer id cannot claim its sequences: the same stamp from
    two keys is two sends, and the owner's retry is still answered from its own record."""
    broker.admin.create_topic("t")
    mine = broker.produce.send("t", [MessageInput(b"a")], ProducerStamp("p", 1, "KEY-A"))
    other = broker.produce.send("t", [MessageInput(b"b")], ProducerStamp("p", 1, "KEY-B"))
    assert not other.duplicate
    again = broker.produce.send("t", [MessageInput(b"a")], ProducerStamp("p", 1, "KEY-A"))
    assert again.duplicate and again.receipts == mine.receipts


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


def test_a_produce_costs_one_object_and_plain_writes_whatever_its_size(broker):
    """The index item, then the head; a stamped produce puts its claim first. No
    transaction (which would cost twice its items) and no read once the tail is cached."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"warm")  # the tail is read once per container
    calls, remove = count_calls()
    try:
        send(broker, "t", *[b"m"] * 500)
        plain = Counter(calls)
        calls.clear()
        broker.produce.send("t", [MessageInput(b"m")] * 500, ProducerStamp("p", 1))
    finally:
        remove()
    assert plain == Counter({"s3.PutObject": 1, "dynamodb.PutItem": 1, "dynamodb.UpdateItem": 1})
    assert calls == Counter({"s3.PutObject": 1, "dynamodb.PutItem": 2, "dynamodb.UpdateItem": 1})


class SimulatedCrash(BaseException):
    pass


@pytest.mark.parametrize(
    "message",
    [
        MessageInput(b"x", born_timestamp=253_402_300_800_000),  # after year 9999
        MessageInput(b"x", tag="\ud800"),
        MessageInput(b"x", keys=("\udfff",)),
        MessageInput(b"x", properties={"k": "\ud800"}),
        MessageInput(b"x", message_group="\ud800"),
        MessageInput(b"x", message_id="abc\n"),
    ],
)
def test_unstorable_fields_are_refused(broker, message):
    broker.admin.create_topic("t", queues=1)
    with pytest.raises(InvalidMessage):
        broker.produce.send("t", [message])
    send(broker, "t", b"fine")
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"fine"]


def test_retry_with_another_payload_after_a_crash_stores_the_new_payload(broker, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    stamp = ProducerStamp("p", 3)
    with monkeypatch.context() as patch:
        patch.setattr(
            BatchAppender, "append", lambda *a, **k: (_ for _ in ()).throw(SimulatedCrash())
        )
        with pytest.raises(SimulatedCrash):
            broker.produce.send("t", [MessageInput(b"first")], stamp)
    broker.produce.send("t", [MessageInput(b"second"), MessageInput(b"third")], stamp)
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [m.message.body for m in got] == [b"second", b"third"]
    with pytest.raises(IdempotencyConflict):
        broker.produce.send("t", [MessageInput(b"first")], stamp)
