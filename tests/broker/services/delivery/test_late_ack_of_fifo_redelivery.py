"""A FIFO topic redelivers an expired lease in place (a new lease id on the same offsets):
an ack of the first delivery's handle answers ``expired`` even after the redelivery was
acked, as an ack of a handle whose message was moved to the retry topic does."""

from __future__ import annotations

from broker_helpers import ack_statuses
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
