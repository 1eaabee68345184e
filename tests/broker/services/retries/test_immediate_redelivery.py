"""A group whose redelivery is immediate (the SQS adapter's groups): an expired lease comes
back in place as soon as its deadline passed, invisible times may be 0, and the max delivery
attempts still send a message to the dead letters. On in-process moto with a fake clock."""

from __future__ import annotations

import pytest
from broker_helpers import ack_statuses, send, statuses
from cirrusmq_broker.errors import InvalidDuration, InvalidRequest, ReceiptHandleExpired
from cirrusmq_broker.rules.retries import REDELIVERY_BACKOFF, REDELIVERY_IMMEDIATE


def test_the_default_is_the_backoff_and_other_values_are_refused(broker):
    assert broker.retries.redelivery("g") == REDELIVERY_BACKOFF
    with pytest.raises(InvalidRequest):
        broker.retries.set_redelivery("g", "soon")
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    assert broker.retries.redelivery("g", fresh=True) == REDELIVERY_IMMEDIATE


def test_an_expired_lease_comes_back_at_once_in_place(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    for body in (b"a", b"b", b"c"):
        send(broker, "t", body)
    first = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=10)
    assert [m.message.offset for m in first] == [0, 1, 2]
    clock.advance(10)
    again = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=2)
    rest = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=10)
    assert [(m.message.topic, m.message.offset, m.delivery_attempt) for m in again + rest] == [
        ("t", 0, 2),
        ("t", 1, 2),
        ("t", 2, 2),
    ]
    assert broker.consume.receive("g", "t") == []
    # the latest handles ack; the first ones are stale (the message came back)
    assert ack_statuses(broker, "g", [first[0].receipt_handle]) == ["expired"]
    with pytest.raises(ReceiptHandleExpired):
        broker.consume.change_invisible("g", first[1].receipt_handle, 30)
    handles = [m.receipt_handle for m in again + rest]
    assert ack_statuses(broker, "g", handles) == ["acked"] * 3
    clock.advance(60)
    assert broker.consume.receive("g", "t") == []
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (3, 0)


def test_invisible_time_zero_only_for_an_immediate_group(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    with pytest.raises(InvalidDuration):
        broker.consume.receive("g", "t", invisible_seconds=0)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    [peeked] = broker.consume.receive("g", "t", invisible_seconds=0)
    [held] = broker.consume.receive("g", "t", invisible_seconds=600)
    assert (peeked.delivery_attempt, held.delivery_attempt) == (1, 2)
    broker.consume.change_invisible("g", held.receipt_handle, 0)
    [released] = broker.consume.receive("g", "t", invisible_seconds=600)
    assert released.message.message_id == held.message.message_id
    assert released.delivery_attempt == 3
    with pytest.raises(InvalidDuration):
        broker.consume.receive("other", "t", invisible_seconds=0)


def test_the_last_attempt_still_makes_a_dead_letter(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    broker.retries.set_max_delivery_attempts("g", 3)
    send(broker, "t", b"poison")
    attempts = []
    for _ in range(3):
        [m] = broker.consume.receive("g", "t", invisible_seconds=10)
        attempts.append(m.delivery_attempt)
        clock.advance(10)
    assert attempts == [1, 2, 3]
    assert broker.consume.receive("g", "t") == []
    [dead] = broker.dead_letters.list("g").dead_letters
    assert (dead.message.body, dead.message.system.reconsume_count) == (b"poison", 3)
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (1, 0)


def test_a_message_never_deleted_does_not_hold_new_ones_back(broker, clock, monkeypatch):
    """Flow control bounds the offsets behind a queue's oldest unsettled message: an expired
    lease of an immediate group that holds that window moves to the retry topic (attempt
    + 1) instead of staying in place, so new messages keep coming (SQS has no such bound).
    The bound is made small; the path is the production one."""
    from cirrusmq_broker import limits

    monkeypatch.setattr(limits, "MAX_INFLIGHT_PER_QUEUE", 20)
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    broker.retries.set_max_delivery_attempts("g", 1000)
    send(broker, "t", b"poison")
    bodies = [f"m{i}".encode() for i in range(60)]
    for body in bodies:
        send(broker, "t", body)
    received: list[bytes] = []
    poison_attempts: list[int] = []
    for _ in range(40):
        got = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=10)
        for m in got:
            if m.message.body == b"poison":
                poison_attempts.append(m.delivery_attempt)
        rest = [m for m in got if m.message.body != b"poison"]
        received += [m.message.body for m in rest]
        if rest:
            handles = [m.receipt_handle for m in rest]
            assert ack_statuses(broker, "g", handles) == ["acked"] * len(rest)
        if len(received) >= len(bodies):
            break
        clock.advance(11)
    assert sorted(received) == sorted(bodies)  # all of them, none twice
    assert poison_attempts == list(range(1, len(poison_attempts) + 1))  # kept coming back
    [status] = [s for s in statuses(broker, "g") if s.topic == "t"]
    assert status.committed_offset == 1 + len(bodies)  # the poison no longer holds the queue


def test_latest_changes_the_lease_a_message_is_leased_under_now(broker, clock):
    """``latest`` (SQS): a handle of an earlier delivery acts on the message's current lease,
    wherever it is now: redelivered in the handle's slot, in the rest of a split lease, or
    moved to a lease of its own; a settled message stays refused."""
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    for body in (b"a", b"b", b"c", b"d"):
        send(broker, "t", body)
    first = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=10)
    assert [m.message.offset for m in first] == [0, 1, 2, 3]
    clock.advance(10)
    again = broker.consume.receive("g", "t", invisible_seconds=600, max_messages=2)
    rest = broker.consume.receive("g", "t", invisible_seconds=600, max_messages=10)
    assert [m.message.offset for m in again + rest] == [0, 1, 2, 3]
    broker.consume.change_invisible("g", again[1].receipt_handle, 900)  # 1 moves out
    assert ack_statuses(broker, "g", [rest[1].receipt_handle]) == ["acked"]  # 3 settled
    for stale in first[:3]:
        with pytest.raises(ReceiptHandleExpired):  # the native default: refused
            broker.consume.change_invisible("g", stale.receipt_handle, 0)
        changed = broker.consume.change_invisible("g", stale.receipt_handle, 0, latest=True)
        assert changed.message.offset == stale.message.offset
    with pytest.raises(ReceiptHandleExpired):
        broker.consume.change_invisible("g", first[3].receipt_handle, 0, latest=True)
    back = broker.consume.receive("g", "t", invisible_seconds=600, max_messages=10)
    assert sorted(m.message.offset for m in back) == [0, 1, 2]
    assert all(m.delivery_attempt == 3 for m in back)


def _one_per_queue(broker, topic: str, queues: int, prefix: bytes) -> None:
    """Send until every queue of ``topic`` holds a message."""
    filled: set[int] = set()
    n = 0
    while len(filled) < queues:
        [receipt] = send(broker, topic, prefix + str(n).encode())
        filled.add(receipt.queue)
        n += 1


def test_the_lease_that_expired_first_goes_before_newer_messages_of_other_queues(broker, clock):
    """Acked leases leave their queues' bounds stale-low (here older than the expired one's):
    the receive finds the queue whose lease truly expired, and stores the stale bounds it
    made exact, so the next receives do not look at those queues' leases again."""
    broker.admin.create_topic("t", queues=8)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    _one_per_queue(broker, "t", 8, b"old ")
    first = []
    while len(first) < 8:  # one at a time: each lease's deadline later than the one before
        first += broker.consume.receive("g", "t", invisible_seconds=10, max_messages=1)
        clock.advance(0.1)
    *acked, kept = first
    assert ack_statuses(broker, "g", [m.receipt_handle for m in acked]) == ["acked"] * 7
    clock.advance(11)
    _one_per_queue(broker, "t", 8, b"new ")
    [again] = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=1)
    assert (again.message.message_id, again.delivery_attempt) == (kept.message.message_id, 2)
    stored = broker.states.load("g", "t", range(8))
    assert [q for q, state in stored.items() if state.may_have_expired(clock.now)] == []


def test_a_lease_still_running_beside_an_expired_one_stays_invisible(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    send(broker, "t", b"a", b"b")
    [early] = broker.consume.receive("g", "t", invisible_seconds=5, max_messages=1)
    clock.advance(1)
    [late] = broker.consume.receive("g", "t", invisible_seconds=5, max_messages=1)
    clock.advance(4.5)  # the first lease expired, the second has 0.5 s to run
    again = broker.consume.receive("g", "t", invisible_seconds=5, max_messages=10)
    assert [m.message.message_id for m in again] == [early.message.message_id]
    clock.advance(1)
    [last] = broker.consume.receive("g", "t", invisible_seconds=5, max_messages=10)
    assert (last.message.message_id, last.delivery_attempt) == (late.message.message_id, 2)


def test_an_old_handle_of_a_moved_out_message_redelivered_since_acks_nothing(broker, clock):
    """b moved to a lease of its own (change_invisible), expired and came back in place:
    the first delivery's handle is stale, and its ack leaves the new delivery's lease."""
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_redelivery("g", REDELIVERY_IMMEDIATE)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", invisible_seconds=60, max_messages=10)
    broker.consume.change_invisible("g", b.receipt_handle, 10)
    clock.advance(10)
    [again] = broker.consume.receive("g", "t", invisible_seconds=60, max_messages=10)
    assert (again.message.offset, again.delivery_attempt) == (1, 2)
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["expired"]
    assert ack_statuses(broker, "g", [again.receipt_handle]) == ["acked"]
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]
    clock.advance(120)
    assert broker.consume.receive("g", "t") == []
