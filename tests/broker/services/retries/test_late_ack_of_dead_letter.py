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
