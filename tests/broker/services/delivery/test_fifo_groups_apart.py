"""FIFO receives that hold each message group on its own (``per_group``, SQS's FIFO queues):
one lease per group, each message its own invisible time, whole groups in the order they
became visible across the topic's queues; an ack within visibility refuses a handle whose
invisible time passed. A crash at any call of such a receive loses nothing and keeps each
group's order."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from broker_helpers import send
from cirrusmq_broker.model import MessageType
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

    remove = observe_calls(observer)
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


def receive(broker, topic: str, most: int = 10, seconds: int = 30):
    return broker.consume.receive(
        "G", topic, max_messages=most, invisible_seconds=seconds, per_group=True
    )


def bodies(received) -> list[bytes]:
    return [r.message.body for r in received]


def test_groups_come_whole_in_the_order_they_became_visible_across_queues(broker, clock):
    fifo(broker, "f", queues=4)
    for body, group in ((b"a0", "a"), (b"b0", "b"), (b"a1", "a"), (b"c0", "c"), (b"b1", "b")):
        send(broker, "f", body, message_group=group)
        clock.advance(1)
    assert bodies(receive(broker, "f", most=3)) == [b"a0", b"a1", b"b0"]
    clock.advance(31)  # a and b visible again, after c (sent before their timeout passed)
    assert bodies(receive(broker, "f")) == [b"c0", b"a0", b"a1", b"b0", b"b1"]


def test_an_ack_within_visibility_refuses_a_handle_whose_time_passed(broker, clock):
    fifo(broker, "f")
    send(broker, "f", b"0", b"1", b"2", message_group="k")
    first, second, third = receive(broker, "f")
    broker.consume.change_invisible("G", second.receipt_handle, 120, per_group=True)
    clock.advance(31)  # first and third past their time, second not
    outcomes = broker.consume.ack(
        "G", [r.receipt_handle for r in (first, second, third)], within_visibility=True
    )
    assert [o.status.value for o in outcomes] == ["expired", "acked", "expired"]
    assert bodies(receive(broker, "f")) == [b"0", b"2"]  # 1 deleted: the rest in order
    assert [o.status.value for o in broker.consume.ack("G", [first.receipt_handle])] == ["expired"]


def test_the_native_ack_of_a_lease_past_its_time_still_settles(broker, clock):
    fifo(broker, "f")
    send(broker, "f", b"0", message_group="k")
    [only] = receive(broker, "f")
    clock.advance(31)
    assert [o.status.value for o in broker.consume.ack("G", [only.receipt_handle])] == ["acked"]
    clock.advance(31)
    assert receive(broker, "f") == []


def test_a_crash_at_each_call_of_a_per_group_receive_loses_nothing_and_keeps_order(broker, clock):
    fifo(broker, "probe", queues=2)
    send(broker, "probe", b"0", message_group="a")
    send(broker, "probe", b"0", message_group="b")
    total = calls_of(lambda: receive(broker, "probe"))
    assert total >= 2
    for call in range(1, total + 1):
        topic = f"f{call}"
        fifo(broker, topic, queues=2)
        for n in range(3):
            send(broker, topic, b"a%d" % n, message_group="a")
            send(broker, topic, b"b%d" % n, message_group="b")
        with crash_at(call), pytest.raises(Crash):
            receive(broker, topic, most=4)
        clock.advance(61)  # whatever the crashed receive leased comes back
        seen: list[bytes] = []
        for _ in range(6):
            got = receive(broker, topic, most=2)
            seen += bodies(got)
            if got:
                broker.consume.ack("G", [r.receipt_handle for r in got])
        assert [b for b in seen if b[:1] == b"a"] == [b"a0", b"a1", b"a2"], (call, seen)
        assert [b for b in seen if b[:1] == b"b"] == [b"b0", b"b1", b"b2"], (call, seen)


def test_a_delete_of_many_groups_costs_the_calls_of_one_group(broker, clock):
    fifo(broker, "f")
    for n in range(10):
        send(broker, "f", b"%d" % n, message_group=f"k{n}")
    got = receive(broker, "f")
    assert len(got) == 10  # ten groups: ten leases
    handles = [r.receipt_handle for r in got]
    assert calls_of(lambda: broker.consume.ack("G", handles, within_visibility=True)) == 1
    clock.advance(31)
    assert receive(broker, "f") == []


def test_a_delete_of_many_groups_refuses_only_the_handle_past_its_time(broker, clock):
    fifo(broker, "f")
    for n in range(4):
        send(broker, "f", b"%d" % n, message_group=f"k{n}")
    got = receive(broker, "f")
    for r in got[1:]:
        broker.consume.change_invisible("G", r.receipt_handle, 60, per_group=True)
    clock.advance(31)  # the first group's message past its time, the others live
    outcomes = broker.consume.ack("G", [r.receipt_handle for r in got], within_visibility=True)
    assert [o.status.value for o in outcomes] == ["expired", "acked", "acked", "acked"]
    [again] = receive(broker, "f")
    assert again.message.body == got[0].message.body
    broker.consume.ack("G", [again.receipt_handle], within_visibility=True)
    clock.advance(61)
    assert receive(broker, "f") == []


def test_a_message_passed_over_for_a_later_group_comes_in_the_next_receive(broker, clock):
    fifo(broker, "f")
    send(broker, "f", b"b0", message_group="b")
    clock.advance(1)
    send(broker, "f", b"a0", message_group="a")
    send(broker, "f", b"b1", message_group="b")
    assert bodies(receive(broker, "f", most=2)) == [b"b0", b"b1"]  # a0 passed over
    assert bodies(receive(broker, "f")) == [b"a0"]
