"""Crash matrix of the retry moves: each AWS call of a move fails in turn, then
the move runs again; nothing is lost and nothing is stored twice.

Moves: lease expiry -> retry topic, nack -> retry topic, last attempt -> DLQ, DLQ -> redrive.
A crash is a BaseException raised before the n-th AWS call of the move (the Lambda dies
there); the re-run is the next poll / the client's resend / the admin's re-run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from broker_helpers import Crash, crashing_at, send, sent_and_redriven, statuses, stream_count
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.groups import GroupStateStore

_names = itertools.count()


def calls_of(action: Callable[[], object]) -> list[str]:
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(f"{service}:{operation}"))
    try:
        action()
    finally:
        remove()
    return seen


def matrix(prepare: Callable[[str], Callable[[], object]], check: Callable[[str], None]) -> int:
    """``prepare(name)`` sets a scene up and returns the move; every call of it is failed in
    turn, the move is re-run and ``check(name)`` judges the outcome. Returns the calls."""
    clean = f"c{next(_names)}"
    n = len(calls_of(prepare(clean)))
    check(clean)
    assert n > 0
    for i in range(n):
        name = f"c{next(_names)}"
        move = prepare(name)
        assert crashing_at(i, move), f"call {i} of {n} was not made"
        move()  # the re-run
        check(name)
    return n


def test_lease_expiry_to_retry(broker, clock):
    def prepare(name: str):
        broker.admin.create_topic(name, queues=1)
        send(broker, name, b"a", b"b")
        broker.consume.receive(name, name, invisible_seconds=10, max_messages=2)
        clock.advance(10)
        return lambda: broker.consume.receive(name, name)

    def check(name: str) -> None:
        assert stream_count(broker, f"retry.{name}.{name}#") == 2
        [status] = [s for s in statuses(broker, name) if s.topic == name]
        assert status.committed_offset == 2
        clock.advance(10)
        got = broker.consume.receive(name, name, max_messages=10)
        assert sorted(m.message.body for m in got) == [b"a", b"b"]

    print(f"\nexpiry -> retry: {matrix(prepare, check)} AWS calls failed in turn")


def test_nack_to_retry(broker, clock):
    def prepare(name: str):
        broker.admin.create_topic(name, queues=1)
        send(broker, name, b"a", b"b")
        got = broker.consume.receive(name, name, max_messages=2)
        handles = [m.receipt_handle for m in got]
        return lambda: broker.retries.nack(name, handles)

    def check(name: str) -> None:
        assert stream_count(broker, f"retry.{name}.{name}#") == 2
        [status] = [s for s in statuses(broker, name) if s.topic == name]
        assert (status.committed_offset, status.inflight) == (2, 0)

    print(f"\nnack -> retry: {matrix(prepare, check)} AWS calls failed in turn")


def test_last_attempt_to_dlq(broker, clock):
    def prepare(name: str):
        broker.admin.create_topic(name, queues=1)
        broker.retries.set_max_delivery_attempts(name, 1)
        send(broker, name, b"poison")
        broker.consume.receive(name, name, invisible_seconds=10)
        clock.advance(10)
        return lambda: broker.consume.receive(name, name)

    def check(name: str) -> None:
        assert stream_count(broker, f"dlq.{name}#") == 1
        assert stream_count(broker, f"retry.{name}.") == 0
        [dead] = broker.dead_letters.list(name).dead_letters
        assert dead.message.system.reconsume_count == 1
        [status] = [s for s in statuses(broker, name) if s.topic == name]
        assert status.committed_offset == 1

    print(f"\nlast attempt -> DLQ: {matrix(prepare, check)} AWS calls failed in turn")


def test_redrive(broker, clock):
    def prepare(name: str):
        broker.admin.create_topic(name, queues=1)
        broker.retries.set_max_delivery_attempts(name, 1)
        send(broker, name, b"p1", b"p2")
        broker.consume.receive(name, name, invisible_seconds=10, max_messages=2)
        clock.advance(10)
        broker.consume.receive(name, name)
        assert len(broker.dead_letters.list(name).dead_letters) == 2
        return lambda: broker.dead_letters.redrive(name)

    def check(name: str) -> None:
        assert sent_and_redriven(broker, name, name) == 4  # 2 sent + 2 redriven, once
        got = broker.consume.receive(name, name, max_messages=10)
        assert sorted(m.message.body for m in got) == [b"p1", b"p2"]
        assert all(m.delivery_attempt == 1 for m in got)
        assert broker.dead_letters.redrive(name).redriven == 0

    print(f"\nDLQ -> redrive: {matrix(prepare, check)} AWS calls failed in turn")


def test_an_ack_between_the_crash_and_the_rerun(broker, clock):
    """The expired lease's unsettled set shrinks between a failed move (the object written,
    its transaction failed) and the re-run: the re-run moves only what is left, in an
    object of its own; the message acked in between is acked for good, none is lost."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=2)
    clock.advance(10)
    count = itertools.count()

    def fail_the_move(service: str, operation: str, params: object) -> None:
        if operation == "TransactWriteItems" and next(count) == 0:
            raise Crash()

    remove = observe_calls(fail_the_move)
    try:
        with pytest.raises(Crash):
            broker.consume.receive("g", "t")  # the retry object is written, not appended
    finally:
        remove()
    assert stream_count(broker, "retry.g.t#") == 0
    assert [o.status.value for o in broker.consume.ack("g", [a.receipt_handle])] == ["acked"]
    assert broker.consume.receive("g", "t") == []  # the re-run moves b only
    assert stream_count(broker, "retry.g.t#") == 1
    [status] = [s for s in statuses(broker, "g") if s.topic == "t"]
    assert (status.committed_offset, status.inflight) == (2, 0)
    clock.advance(10)
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [m.message.body for m in got] == [b"b"]
    assert [o.status.value for o in broker.consume.ack("g", [b.receipt_handle])] == ["expired"]


def test_expiry_crash_then_nack_stores_one_retry_copy(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    with monkeypatch.context() as patch:  # the receive dies after the retry append

        def crash(self, state):
            raise Crash()

        patch.setattr(GroupStateStore, "save", crash)
        with pytest.raises(Crash):
            broker.consume.receive("g", "t")
    assert stream_count(broker, "retry.") == 1
    out = broker.retries.nack("g", [m.receipt_handle])  # right at the deadline
    assert [o.status for o in out] == ["expired"]
    broker.consume.receive("g", "t")  # the re-run of the expiry
    assert stream_count(broker, "retry.") == 1
    clock.advance(60)
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [r.delivery_attempt for r in got] == [2]


def test_an_expiry_rerun_after_max_attempts_changed_stores_nothing_twice(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.retries.set_max_delivery_attempts("g", 2)
    broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    with monkeypatch.context() as patch:  # the expiry dies after its append (to a retry level)

        def crash(self, state):
            raise Crash()

        patch.setattr(GroupStateStore, "save", crash)
        with pytest.raises(Crash):
            broker.consume.receive("g", "t")
    assert stream_count(broker, "retry.") == 1
    broker.retries.set_max_delivery_attempts("g", 1)  # the re-run's target is the DLQ now
    broker.consume.receive("g", "t")
    assert stream_count(broker, "retry.") + stream_count(broker, "dlq.") == 1
