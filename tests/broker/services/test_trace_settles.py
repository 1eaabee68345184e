"""Acks and nacks of a traced topic are traced on any instance, not only on one that has
the topic cached (an ack does not read its topic)."""

from __future__ import annotations

import pytest
from cirrusmq_broker.clock import wall_ms
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput


@pytest.fixture(autouse=True)
def clock_at_wall_time(clock) -> None:  # noqa: ANN001
    clock.now = wall_ms()


def in_request(broker: Broker, action):  # noqa: ANN001, ANN201
    with broker.trace.request():
        return action()


@pytest.mark.parametrize("settle", ["ack", "nack"])
def test_a_settle_on_an_instance_without_the_topic_cached_is_traced(
    broker: Broker, settle: str
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)
    (receipt,) = in_request(
        broker, lambda: broker.produce.send("orders", [MessageInput(b"m")])
    ).receipts
    (got,) = in_request(broker, lambda: broker.consume.receive("g", "orders", max_messages=1))
    broker.catalog.forget("orders")  # as an instance that has not seen the topic in 30 s
    if settle == "ack":
        in_request(broker, lambda: broker.consume.ack("g", [got.receipt_handle]))
    else:
        in_request(broker, lambda: broker.retries.nack("g", [got.receipt_handle]))
    kinds = [e["kind"] for e in broker.trace_reader.trace_message("orders", receipt.message_id)]
    assert kinds[:3] == ["sent", "delivered", f"{settle}ed"]


def test_a_handle_renewed_by_a_change_of_invisible_time_still_traces_its_ack(
    broker: Broker,
) -> None:
    broker.admin.create_topic("orders", queues=1, trace=True)
    (receipt,) = in_request(
        broker, lambda: broker.produce.send("orders", [MessageInput(b"m")])
    ).receipts
    (got,) = in_request(broker, lambda: broker.consume.receive("g", "orders", max_messages=1))
    renewed = broker.consume.change_invisible("g", got.receipt_handle, 60)
    broker.catalog.forget("orders")
    in_request(broker, lambda: broker.consume.ack("g", [renewed.receipt_handle]))
    kinds = [e["kind"] for e in broker.trace_reader.trace_message("orders", receipt.message_id)]
    assert kinds == ["sent", "delivered", "acked"]


def test_a_nack_of_a_fifo_message_redelivered_in_place_keeps_its_own_attempt(
    broker: Broker, clock
) -> None:  # noqa: ANN001
    """A FIFO message is redelivered at the same place: each ack / nack joined to it keeps
    the attempt of the delivery it settled, not the place's latest one."""
    broker.admin.create_topic("orders", queues=1, message_type="FIFO", trace=True)
    message = MessageInput(b"m", message_group="g1")
    (receipt,) = in_request(broker, lambda: broker.produce.send("orders", [message])).receipts
    (first,) = in_request(
        broker, lambda: broker.consume.receive("g", "orders", max_messages=1, client_id="a")
    )
    in_request(broker, lambda: broker.retries.nack("g", [first.receipt_handle]))
    clock.advance(3600)
    (second,) = in_request(
        broker, lambda: broker.consume.receive("g", "orders", max_messages=1, client_id="a")
    )
    assert second.delivery_attempt == 2
    in_request(broker, lambda: broker.consume.ack("g", [second.receipt_handle]))
    events = broker.trace_reader.trace_message("orders", receipt.message_id)
    settled = [(e["kind"], e["attempt"]) for e in events if e["kind"] in ("nacked", "acked")]
    assert settled == [("nacked", 1), ("acked", 2)]
