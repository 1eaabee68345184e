"""A redrive answered by one container reaches a consumer served by another: its container
read the group's retry topic when it was empty (and would wait 5 s to read it again), and
the consumer, woken by the append's notification, receives the letter at once."""

from __future__ import annotations

from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput


def test_a_woken_consumer_of_another_container_gets_a_redriven_letter_at_once(
    broker, settings, clock
):
    consumer_side = Broker(settings, clock)
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_max_delivery_attempts("g1", 1)
    broker.produce.send("t", [MessageInput(b"m")])
    [got] = consumer_side.consume.receive("g1", "t")
    consumer_side.retries.nack("g1", [got.receipt_handle])  # dead: no retry topic yet
    assert consumer_side.consume.receive("g1", "t", due_hint=lambda _: None) == []
    assert broker.dead_letters.redrive("g1").redriven == 1
    [back] = consumer_side.consume.receive("g1", "t", due_hint=lambda _: None)
    assert (back.message.body, back.delivery_attempt) == (b"m", 1)
