"""Orderly consumption survives a crash at each AWS call: the failing call is made to raise
(a process dying there), then the step is run again; nothing is lost, order holds, the
registry and the locks end as if nothing had failed."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from broker_helpers import send
from cirrusmq_broker.model import MessageType
from cirrusmq_broker.rules.allocation import allocate_averagely, assignment
from cirrusmq_broker.storage.clients import observe_calls


class Crash(Exception):
    pass


@contextmanager
def crash_at(call: int):
    """The ``call``-th AWS call from here raises (before it reaches AWS)."""
    seen = [0]

    def observer(service, operation, params):
        seen[0] += 1
        if seen[0] == call:
            raise Crash(f"{service}.{operation}")

    remove = observer and observe_calls(observer)
    try:
        yield seen
    finally:
        remove()


def calls_of(step) -> int:
    with crash_at(10**9) as seen:
        step()
    return seen[0]


def fifo(broker, name: str, queues: int = 1) -> None:
    broker.admin.create_topic(name, queues=queues, message_type=MessageType.FIFO)


def test_a_crash_at_each_call_of_an_orderly_receive_loses_nothing_and_keeps_order(broker, clock):
    fifo(broker, "probe")
    send(broker, "probe", b"0", message_group="k")
    total = calls_of(lambda: broker.consume.receive("G", "probe", client_id="a"))
    assert total >= 2
    for call in range(1, total + 1):
        topic = f"f{call}"
        fifo(broker, topic)
        send(broker, topic, b"0", b"1", b"2", message_group="k")
        with crash_at(call), pytest.raises(Crash):
            broker.consume.receive("G", topic, max_messages=2, client_id="a")
        clock.advance(61)  # whatever the crashed receive leased comes back
        seen: list[int] = []
        for _ in range(5):
            got = broker.consume.receive("G", topic, max_messages=2, client_id="a")
            seen += [r.message.offset for r in got]
            if got:
                broker.consume.ack("G", [r.receipt_handle for r in got])
        assert seen == [0, 1, 2], (call, seen)


def test_a_crash_at_each_call_of_a_deregistration_then_a_rerun_frees_everything(broker, clock):
    for call in range(1, 20):
        topic, group = f"d{call}", f"G{call}"
        fifo(broker, topic, queues=2)
        send(broker, topic, *[b"%d" % i for i in range(6)], message_group="k1")
        send(broker, topic, *[b"%d" % i for i in range(6)], message_group="k2")
        broker.membership.heartbeat(group, "a", {topic: "*"}, orderly=True)
        got = broker.consume.receive(group, topic, max_messages=100, client_id="a")
        broker.consume.ack(group, [r.receipt_handle for r in got])
        with crash_at(call) as seen:
            try:
                broker.membership.deregister(group, "a")
                crashed = False
            except Crash:
                crashed = True
        if crashed:
            broker.membership.deregister(group, "a")  # the re-run
        assert broker.membership.consumers(group) == []
        states, _ = broker.states.list_group(group)
        assert all(s.lock_owner is None for s in states), call
        if not crashed:
            assert seen[0] < call
            break
    else:
        pytest.fail("deregistration never ran through")


def test_a_crash_in_a_heartbeat_then_a_rerun_registers_once(broker):
    fifo(broker, "h")
    for call in (1, 2):  # a group per call: a registered member's next beat may not write
        group = f"G{call}"
        with crash_at(call), pytest.raises(Crash):
            broker.membership.heartbeat(group, "a", {"h": "*"})
        broker.membership.heartbeat(group, "a", {"h": "*"})
        assert [c.client_id for c in broker.membership.consumers(group)] == ["a"]


@pytest.mark.parametrize(
    ("consumers", "queues", "expected"),
    [
        (3, 8, [[0, 1, 2], [3, 4, 5], [6, 7]]),
        (2, 4, [[0, 1], [2, 3]]),
        (3, 2, [[0], [1], []]),
        (1, 5, [[0, 1, 2, 3, 4]]),
        (4, 10, [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]),
    ],
)
def test_allocation_is_rocketmqs_averagely(consumers, queues, expected):
    ids = [f"c{i}" for i in range(consumers)]
    assert [allocate_averagely(reversed(ids), range(queues), cid) for cid in ids] == expected


def test_allocation_covers_every_queue_once_whatever_the_sizes():
    for consumers in range(1, 12):
        for queues in range(0, 20):
            shares = assignment([f"c{i:02d}" for i in range(consumers)], list(range(queues)))
            flat = sorted(q for share in shares.values() for q in share)
            assert flat == list(range(queues))
            sizes = [len(s) for s in shares.values()]
            assert max(sizes) - min(sizes) <= 1
    assert allocate_averagely(["a"], [0, 1], "stranger") == []
