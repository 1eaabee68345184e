"""An empty receive's ``due_hint`` (the response's ``next_due_ms``) across Lambda containers:
each container keeps its own view of the group's retry topic, and a consumer woken by a
retry append may be answered by a container that did not make the append."""

from __future__ import annotations

from broker_helpers import send
from cirrusmq_broker.container import Broker


def _hint(broker: Broker, group: str, topic: str) -> int | None:
    hints: list[int] = []
    got = broker.consume.receive(group, topic, due_hint=hints.append)
    assert got == []
    return hints[0] if hints else None


def test_a_nack_in_another_container_is_named_by_the_next_empty_receive(broker, settings, clock):
    """Consumer B went idle through container 2 (which then read the retry topic and found
    nothing); consumer A's nack goes through container 1. The notifier wakes B, whose
    receive reaches container 2 again: it must name when the retry is due, else B sleeps
    until its safety poll."""
    other = Broker(settings, clock)  # a second container of the same stack
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"earlier")  # an earlier nack made the group's retry topic
    [earlier] = broker.consume.receive("g", "t")
    broker.retries.nack("g", [earlier.receipt_handle])
    clock.advance(11)
    [again] = other.consume.receive("g", "t")
    broker.consume.ack("g", [again.receipt_handle])
    send(broker, "t", b"m")
    [held] = broker.consume.receive("g", "t", invisible_seconds=60)  # consumer A, container 1
    assert broker.consume.receive("g", "t") == []
    clock.advance(1)
    assert _hint(other, "g", "t") is not None  # B, container 2: A's lease (≤ 60 s)
    broker.retries.nack("g", [held.receipt_handle])  # A gives it back through container 1
    clock.advance(1)
    hint = _hint(other, "g", "t")  # B woken by the retry append, container 2
    assert hint is not None and 1_000 <= hint <= 10_000, hint
