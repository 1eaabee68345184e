"""An internal topic (a group's DLQ, its retry topic) another container created is seen at
once: a container that looked before it existed does not answer from that miss."""

from __future__ import annotations

from broker_helpers import send
from cirrusmq_broker.container import Broker


def two_containers(settings, clock) -> tuple[Broker, Broker]:
    """Two containers over one backend, their caches apart; topic ``t`` (one queue) and
    group ``g``, whose first delivery is its last (a nack dead-letters it)."""
    first, second = Broker(settings, clock), Broker(settings, clock)
    first.admin.create_topic("t", queues=1)
    first.retries.set_max_delivery_attempts("g", 1)
    return first, second


def dead_letter(broker: Broker, body: bytes) -> None:
    send(broker, "t", body)
    got = broker.consume.receive("g", "t", max_messages=1)
    broker.retries.nack("g", [m.receipt_handle for m in got])


def test_a_dead_letter_listing_shows_another_containers_first_letter(settings, clock):
    first, second = two_containers(settings, clock)
    assert first.dead_letters.list("g").dead_letters == []  # no DLQ yet
    dead_letter(second, b"m1")
    assert [d.message.body for d in first.dead_letters.list("g").dead_letters] == [b"m1"]


def test_a_redrive_sends_back_another_containers_first_letter(settings, clock):
    first, second = two_containers(settings, clock)
    assert first.dead_letters.redrive("g").redriven == 0  # no DLQ yet
    dead_letter(second, b"m1")
    assert first.dead_letters.redrive("g").redriven == 1
    assert [m.message.body for m in first.consume.receive("g", "t")] == [b"m1"]


def test_a_purge_drops_another_containers_first_letter(settings, clock):
    first, second = two_containers(settings, clock)
    assert first.dead_letters.purge("g") == 0  # no DLQ yet
    dead_letter(second, b"m1")
    assert first.dead_letters.purge("g") == 1
    assert second.dead_letters.list("g").dead_letters == []


def test_a_receive_serves_a_retry_another_container_moved_once_it_is_due(settings, clock):
    first, second = two_containers(settings, clock)
    first.retries.set_max_delivery_attempts("g", 3)
    assert first.consume.receive("g", "t") == []  # no retry topic yet
    send(second, "t", b"m1")
    got = second.consume.receive("g", "t", max_messages=1)
    second.retries.nack("g", [m.receipt_handle for m in got])  # into the retry topic
    clock.advance(60)  # past its backoff
    again = first.consume.receive("g", "t", max_messages=1)
    assert [(m.message.body, m.delivery_attempt) for m in again] == [(b"m1", 2)]


def test_a_nack_of_a_retry_another_container_delivered_is_taken(settings, clock):
    first, second = two_containers(settings, clock)
    first.retries.set_max_delivery_attempts("g", 3)
    assert first.consume.receive("g", "t") == []  # no retry topic yet
    send(second, "t", b"m1")
    got = second.consume.receive("g", "t", max_messages=1)
    second.retries.nack("g", [m.receipt_handle for m in got])
    clock.advance(60)
    retried = second.consume.receive("g", "t", max_messages=1)
    assert [m.delivery_attempt for m in retried] == [2]
    outcomes = first.retries.nack("g", [m.receipt_handle for m in retried])
    assert [o.status.value for o in outcomes] == ["acked"]
