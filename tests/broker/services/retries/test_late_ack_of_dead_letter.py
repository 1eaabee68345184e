"""An ack of a handle whose lease expired and whose message that expiry moved on answers
``expired``, whichever topic the move went to and whatever else the retry topic holds."""

from __future__ import annotations

from broker_helpers import ack_statuses, send


def dead_letters(broker, group: str) -> list[bytes]:
    return sorted(d.message.body for d in broker.dead_letters.list(group).dead_letters)


def test_a_late_ack_of_a_dead_lettered_message_answers_expired(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_max_delivery_attempts("g", 2)
    send(broker, "t", b"m0", b"m1")
    [m0] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    [m1] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    clock.advance(10)
    assert broker.consume.receive("g", "t") == []  # both expire: retry level 0, offsets 0, 1
    clock.advance(30)
    again = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    assert [(m.message.body, m.delivery_attempt) for m in again] == [(b"m0", 2)]
    assert ack_statuses(broker, "g", [again[0].receipt_handle]) == ["acked"]
    [late] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    assert (late.message.body, late.delivery_attempt) == (b"m1", 2)
    clock.advance(10)
    broker.consume.receive("g", "t")  # the last attempt expired: m1 goes to DLQ queue 0 at 0
    assert dead_letters(broker, "g") == [b"m1"]
    assert ack_statuses(broker, "g", [late.receipt_handle]) == ["expired"]


def test_late_acks_after_a_move_into_the_dead_letter_destination(broker, clock):
    """The expiry's moved batch is found in the group's dead-letter destination: a re-ack
    of what was acked before the move answers ``acked``, an ack of what moved ``expired``."""
    broker.admin.create_topic("t", queues=1)
    broker.admin.create_topic("d", queues=1)
    broker.retries.set_max_delivery_attempts("g", 1)
    broker.retries.set_dead_letter_destination("g", "d", {"from": "t"})
    send(broker, "t", b"m0", b"m1")
    m0, m1 = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    assert ack_statuses(broker, "g", [m0.receipt_handle]) == ["acked"]
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []  # m1 goes to "d"
    assert [r.message.body for r in broker.consume.receive("reader", "d")] == [b"m1"]
    assert dead_letters(broker, "g") == []
    assert ack_statuses(broker, "g", [m0.receipt_handle, m1.receipt_handle]) == [
        "acked",
        "expired",
    ]
