"""A redrive reaches only the group whose dead letter it was (as RocketMQ's per-group
``%DLQ%<group>`` resend does): another group reading the same topic gets nothing again.
The redriven message comes back with its id and its first place, its attempts counted
from 1 again, on a normal and on a FIFO topic."""

from __future__ import annotations

import pytest
from broker_helpers import ack_statuses, send, stream_count
from cirrusmq_broker.model import MessageInput, MessageType
from cirrusmq_broker.rules.retries import BACKOFF_SECONDS, RETRY_QUEUES, retry_topic


def dead_lettered_by_g1_acked_by_g2(broker, topic: str, **fields) -> str:
    """``m`` sent to ``topic``: g2 acks it, g1 dead-letters it (one attempt). Its id."""
    [receipt] = send(broker, topic, b"m", **fields)
    broker.retries.set_max_delivery_attempts("g1", 1)
    [g2_got] = broker.consume.receive("g2", topic)
    assert ack_statuses(broker, "g2", [g2_got.receipt_handle]) == ["acked"]
    [g1_got] = broker.consume.receive("g1", topic)
    broker.retries.nack("g1", [g1_got.receipt_handle])
    [letter] = broker.dead_letters.list("g1").dead_letters
    assert letter.message.message_id == receipt.message_id
    return receipt.message_id


@pytest.mark.parametrize("kind", [MessageType.NORMAL, MessageType.FIFO])
def test_a_redrive_reaches_only_the_group_whose_dead_letter_it_was(broker, clock, kind):
    fields = {"message_group": "k"} if kind is MessageType.FIFO else {}
    broker.admin.create_topic("t", queues=2, message_type=kind.value)
    message_id = dead_lettered_by_g1_acked_by_g2(broker, "t", **fields)

    assert broker.dead_letters.redrive("g1").redriven == 1

    assert broker.consume.receive("g2", "t", max_messages=10) == []
    [again] = broker.consume.receive("g1", "t", max_messages=10)
    assert (again.message.body, again.message.message_id) == (b"m", message_id)
    assert (again.message.topic, again.delivery_attempt) == ("t", 1)  # attempts start again
    assert again.message.system.reconsume_count == 0
    assert stream_count(broker, "t#") == 1, "a redrive appended to the topic every group reads"
    assert ack_statuses(broker, "g1", [again.receipt_handle]) == ["acked"]
    clock.advance(3600)
    assert broker.consume.receive("g1", "t", max_messages=10) == []
    assert broker.consume.receive("g2", "t", max_messages=10) == []


def test_a_group_subscribed_after_the_redrive_does_not_get_the_redriven_copy(broker, clock):
    """A group that starts reading the topic from its beginning after the redrive gets the
    message once: the topic holds it once."""
    broker.admin.create_topic("t", queues=1)
    dead_lettered_by_g1_acked_by_g2(broker, "t")
    broker.dead_letters.redrive("g1")
    got = broker.consume.receive("g3", "t", max_messages=10)
    assert [m.message.body for m in got] == [b"m"]


def test_a_redriven_fifo_letter_does_not_wait_for_its_message_group(broker, clock):
    """The letter left its message group's order when it died (the group moved on past it):
    redriven, it is delivered at once, also while a later message of its group is leased."""
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.retries.set_max_delivery_attempts("g1", 1)
    broker.produce.send("f", [MessageInput(b"m1", message_group="k")])
    [m1] = broker.consume.receive("g1", "f")
    broker.retries.nack("g1", [m1.receipt_handle])
    broker.produce.send("f", [MessageInput(b"m2", message_group="k")])
    [m2] = broker.consume.receive("g1", "f", invisible_seconds=60)
    assert m2.message.body == b"m2"
    assert broker.dead_letters.redrive("g1").redriven == 1
    [again] = broker.consume.receive("g1", "f", max_messages=10)
    assert (again.message.body, again.delivery_attempt) == (b"m1", 1)


def test_a_retry_topic_made_before_the_redrive_queue_takes_redriven_letters_at_level_0(
    broker, clock
):
    """A retry topic created with its 16 level queues only (by an earlier release) has no
    redrive queue: a redrive appends to level 0, due after its backoff, still to the group
    only."""
    broker.admin.create_topic("t", queues=1)
    broker.moves.ensure(retry_topic("g1", "t"), RETRY_QUEUES, 24)
    dead_lettered_by_g1_acked_by_g2(broker, "t")
    assert broker.dead_letters.redrive("g1").redriven == 1
    assert broker.consume.receive("g1", "t") == []
    clock.advance(BACKOFF_SECONDS[0])
    [again] = broker.consume.receive("g1", "t")
    assert (again.message.body, again.delivery_attempt) == (b"m", 1)
    assert broker.consume.receive("g2", "t", max_messages=10) == []
