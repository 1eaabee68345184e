"""A redriven dead letter waits in the group's retry topic as long as its topic keeps its
messages: the retry topic was made with the topic's retention at its first retry, and the
topic's retention may have grown since (a change, or the topic deleted and made again)."""

from __future__ import annotations

from broker_helpers import send
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.retries import retry_topic


def _dead_letter_after_a_retry(broker, clock, topic: str) -> None:
    """``m``: g1 nacks it once (its retry topic is made), then it dies (two attempts)."""
    broker.retries.set_max_delivery_attempts("g1", 2)
    send(broker, topic, b"m")
    [got] = broker.consume.receive("g1", topic)
    broker.retries.nack("g1", [got.receipt_handle])
    clock.advance(10)
    [again] = broker.consume.receive("g1", topic)
    assert again.delivery_attempt == 2
    broker.retries.nack("g1", [again.receipt_handle])
    assert len(broker.dead_letters.list("g1").dead_letters) == 1


def test_a_redriven_letter_is_kept_as_long_as_the_topic_keeps_messages_now(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=24)
    _dead_letter_after_a_retry(broker, clock, "t")
    broker.admin.update_topic("t", retention_hours=72)
    assert broker.dead_letters.redrive("g1").redriven == 1
    clock.advance(48 * 3600)  # the consumers were down for two days
    [back] = broker.consume.receive("g1", "t")
    assert (back.message.body, back.delivery_attempt) == (b"m", 1)


def test_a_retry_waits_as_long_as_the_topic_keeps_messages_now(broker, clock):
    """A sibling: a nack's retry in a retry topic made under a shorter retention."""
    broker.admin.create_topic("t", queues=1, retention_hours=24)
    send(broker, "t", b"first")
    [got] = broker.consume.receive("g1", "t")
    broker.retries.nack("g1", [got.receipt_handle])  # the retry topic: 24 h
    broker.admin.update_topic("t", retention_hours=72)
    broker.produce.send("t", [MessageInput(b"m")])
    [m] = [r for r in broker.consume.receive("g1", "t", max_messages=10) if r.message.body == b"m"]
    broker.retries.nack("g1", [m.receipt_handle])
    clock.advance(48 * 3600)
    bodies = [r.message.body for r in broker.consume.receive("g1", "t", max_messages=10)]
    assert bodies == [b"m"]  # "first" was moved under the 24 h retention


def test_a_lookup_by_key_finds_a_redriven_letter_kept_longer_than_the_retry_topic_says(
    broker, clock
):
    """A sibling: a lookup by key in the group's retry topic searches the time its letters
    are kept (the topic's retention now), not the retention the retry topic was made with."""
    broker.admin.create_topic("t", queues=1, retention_hours=24)
    broker.retries.set_max_delivery_attempts("g1", 2)
    broker.produce.send("t", [MessageInput(b"m", keys=("order-7",))])
    [got] = broker.consume.receive("g1", "t")
    broker.retries.nack("g1", [got.receipt_handle])
    clock.advance(10)
    [again] = broker.consume.receive("g1", "t")
    broker.retries.nack("g1", [again.receipt_handle])
    broker.admin.update_topic("t", retention_hours=72)
    assert broker.dead_letters.redrive("g1").redriven == 1
    clock.advance(48 * 3600)
    found = broker.key_lookup.find(retry_topic("g1", "t"), "order-7").messages
    assert [m.body for m in found] == [b"m"]
