"""Two handles of one FIFO lease (the first delivery's and its redelivery in place share the
lease item) named by one request: a nack or a batch of visibility changes must not write
that item twice in one DynamoDB transaction (refused whole: a 500)."""

from __future__ import annotations

import pytest
from cirrusmq_broker.errors import ReceiptHandleExpired
from cirrusmq_broker.model import MessageInput, MessageType


def _two_deliveries(broker, clock):
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"1", message_group="k")])
    [first] = broker.consume.receive("g", "f", invisible_seconds=10)
    clock.advance(11)
    [again] = broker.consume.receive("g", "f", invisible_seconds=10)
    assert again.message.offset == first.message.offset
    return first, again


@pytest.mark.parametrize("within_visibility", [False, True])
def test_one_ack_of_both_deliveries_of_a_fifo_lease_acks_the_current_one(
    broker, clock, within_visibility
):
    """The ack must not write the lease item twice in one transaction."""
    first, again = _two_deliveries(broker, clock)
    outcomes = broker.consume.ack(
        "g", [first.receipt_handle, again.receipt_handle], within_visibility=within_visibility
    )
    assert [o.status for o in outcomes] == ["expired", "acked"]
    clock.advance(11)
    assert broker.consume.receive("g", "f", invisible_seconds=10) == []


@pytest.mark.parametrize("order", ["stale_first", "current_first"])
def test_one_nack_of_both_deliveries_of_a_fifo_lease(broker, clock, order):
    first, again = _two_deliveries(broker, clock)
    handles = [first.receipt_handle, again.receipt_handle]
    if order == "current_first":
        handles.reverse()
    outcomes = broker.retries.nack("g", handles)
    statuses = {h: o.status for h, o in zip(handles, outcomes, strict=True)}
    assert statuses[again.receipt_handle] == "acked"
    assert statuses[first.receipt_handle] == "expired"


@pytest.mark.parametrize("within_visibility", [False, True])
def test_one_ack_naming_a_handle_twice_and_a_stale_one(broker, clock, within_visibility):
    first, again = _two_deliveries(broker, clock)
    handles = [again.receipt_handle, first.receipt_handle, again.receipt_handle]
    outcomes = broker.consume.ack("g", handles, within_visibility=within_visibility)
    assert [o.status for o in outcomes] == ["acked", "expired", "acked"]


def test_visibility_changes_of_both_deliveries_of_a_fifo_lease(broker, clock):
    first, again = _two_deliveries(broker, clock)
    with pytest.raises(ReceiptHandleExpired):
        broker.consume.change_invisible("g", first.receipt_handle, 60)
    broker.consume.change_invisible("g", again.receipt_handle, 60)
    clock.advance(30)
    assert broker.consume.receive("g", "f") == []


def test_one_sqs_fifo_delete_of_both_deliveries_of_a_message_group(broker, clock):
    """SQS FIFO queues hold each message group on its own lease (``per_group``); a
    DeleteMessageBatch naming an old and the current handle of one message."""
    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send(
        "f", [MessageInput(b, message_group=g) for b, g in ((b"1", "a"), (b"2", "b"))]
    )
    first = broker.consume.receive("g", "f", invisible_seconds=10, max_messages=10, per_group=True)
    clock.advance(11)
    again = broker.consume.receive("g", "f", invisible_seconds=10, max_messages=10, per_group=True)
    assert len(first) == len(again) == 2
    handles = [m.receipt_handle for pair in zip(first, again, strict=True) for m in pair]
    outcomes = broker.consume.ack("g", handles, within_visibility=True)
    assert [o.status for o in outcomes] == ["expired", "acked", "expired", "acked"]
    clock.advance(11)
    assert broker.consume.receive("g", "f", max_messages=10, per_group=True) == []
