"""A FIFO topic redelivers an expired lease in place (a new lease id on the same offsets):
an ack of the first delivery's handle answers ``expired`` even after the redelivery was
acked, as an ack of a handle whose message was moved to the retry topic does."""

from __future__ import annotations

import pytest
from broker_helpers import ack_statuses
from cirrusmq_broker.errors import ReceiptHandleExpired
from cirrusmq_broker.model import MessageInput, MessageType


def test_a_late_ack_of_a_fifo_delivery_redelivered_and_acked_answers_expired(broker, clock):
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"1", message_group="k")])
    [first] = broker.consume.receive("g", "f", invisible_seconds=10)
    clock.advance(10)
    [again] = broker.consume.receive("g", "f", invisible_seconds=10)  # in place, at once
    assert (again.delivery_attempt, again.message.offset) == (2, first.message.offset)
    assert ack_statuses(broker, "g", [first.receipt_handle]) == ["expired"]  # B holds it
    assert ack_statuses(broker, "g", [again.receipt_handle]) == ["acked"]
    assert ack_statuses(broker, "g", [first.receipt_handle]) == ["expired"]


def test_a_late_ack_of_a_nacked_fifo_delivery_redelivered_and_acked_answers_expired(broker, clock):
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"1", message_group="k")])
    [first] = broker.consume.receive("g", "f", invisible_seconds=30)
    [nacked] = broker.retries.nack("g", [first.receipt_handle], delay_seconds=10)
    given_back = nacked.status
    assert given_back == "acked"
    clock.advance(10)
    [again] = broker.consume.receive("g", "f", invisible_seconds=10)  # in place, after the delay
    assert (again.delivery_attempt, again.message.offset) == (2, first.message.offset)
    assert ack_statuses(broker, "g", [again.receipt_handle]) == ["acked"]
    assert ack_statuses(broker, "g", [first.receipt_handle]) == ["expired"]


def test_latest_leaves_an_earlier_handle_of_a_fifo_delivery_refused(broker, clock):
    """``latest`` (SQS standard queues) reaches a message's current lease only on a normal
    topic: a FIFO topic's delivery moves whole, and a handle of an earlier delivery may not
    move the current owner's (the SQS adapter decides by the queue, not the handle's topic)."""
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b, message_group="k") for b in (b"1", b"2")])
    first = broker.consume.receive("g", "f", invisible_seconds=10, max_messages=10)
    clock.advance(10)
    again = broker.consume.receive("g", "f", invisible_seconds=600, max_messages=10)
    assert [m.delivery_attempt for m in again] == [2, 2]
    with pytest.raises(ReceiptHandleExpired):
        broker.consume.change_invisible("g", first[0].receipt_handle, 900, latest=True)
    with pytest.raises(ReceiptHandleExpired):
        broker.consume.change_invisible("g", first[1].receipt_handle, 900, latest=True)
    clock.advance(600)  # the current delivery's own time, not the 900 s a stale handle asked
    assert [m.delivery_attempt for m in broker.consume.receive("g", "f", max_messages=10)] == [
        3,
        3,
    ]
