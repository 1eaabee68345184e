"""A receive that its first queue in turn can fill reads that queue alone (its head and the
group's summary there); when that queue falls short it reads the others, in one more call."""

from __future__ import annotations

import time
import types
from collections.abc import Iterator

import pytest
from broker_helpers import send
from cirrusmq_broker import limits
from cirrusmq_broker.errors import StorageUnavailable, Throttled
from cirrusmq_broker.model import MessageType
from cirrusmq_broker.services.delivery import receive as receive_module
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.groups import GroupStateStore
from test_delivery import _queue_of, fill_queues


@pytest.fixture
def head_reads(broker) -> Iterator[list[int]]:
    """How many heads each batched read asked for, in order."""
    table = broker.heads.table
    reads: list[int] = []

    def observe(service: str, operation: str, params: dict) -> None:
        if operation == "BatchGetItem" and table in params["RequestItems"]:
            reads.append(len(params["RequestItems"][table]["Keys"]))

    remove = observe_calls(observe)
    yield reads
    remove()


def test_a_receive_its_first_queue_fills_reads_that_queue_alone(broker, head_reads):
    fill_queues(broker, "t", [10, 10, 10, 10])
    broker.consume.receive("g", "t", max_messages=3)  # learns that one queue can fill it
    head_reads.clear()
    got = [broker.consume.receive("g", "t", max_messages=3) for _ in range(4)]
    assert head_reads == [1, 1, 1, 1]
    assert [len(m) for m in got] == [3, 3, 3, 3]
    assert len({m[0].message.queue for m in got}) == 4  # each call starts at the next queue


def test_a_receive_its_first_queue_cannot_fill_reads_the_others_once(broker, head_reads):
    fill_queues(broker, "t", [5, 5, 5, 5])
    broker.consume.receive("g", "t", max_messages=2)
    head_reads.clear()
    got = broker.consume.receive("g", "t", max_messages=8)
    assert head_reads == [1, 3]
    assert len(got) == 8 and len({m.message.queue for m in got}) >= 2


def test_without_a_backlog_that_fills_it_a_receive_reads_every_queue_at_once(broker, head_reads):
    fill_queues(broker, "t", [2, 2, 2, 2])
    assert len(broker.consume.receive("g", "t", max_messages=8)) == 8
    head_reads.clear()
    got = broker.consume.receive("g", "t", max_messages=8)
    assert head_reads == [4]
    assert len(got) == 0


def test_a_queue_read_late_is_served_within_the_receive(broker):
    """Every message is delivered once, whatever queue each receive read first."""
    fill_queues(broker, "t", [7, 0, 3, 11])
    broker.consume.receive("g", "t", max_messages=1, invisible_seconds=3600)
    seen = []
    for _ in range(12):
        got = broker.consume.receive("g", "t", max_messages=4)
        seen += [(m.message.queue, m.message.offset) for m in got]
        if got:
            broker.consume.ack("g", [m.receipt_handle for m in got])
    assert len(seen) == len(set(seen)) == 20


@pytest.mark.parametrize("error", [Throttled, StorageUnavailable])
def test_a_failed_read_of_the_other_queues_hands_out_what_the_first_leased(
    broker, error, head_reads
):
    fill_queues(broker, "t", [3, 3, 3, 3])
    broker.consume.receive("g", "t", max_messages=1)  # reads in turn from now on
    reads = 0

    def fail_the_second_read(service: str, operation: str, params: dict) -> None:
        nonlocal reads
        if operation == "BatchGetItem" and broker.heads.table in params["RequestItems"]:
            reads += 1
            if reads == 2:
                raise error("injected")

    remove = observe_calls(fail_the_second_read)
    try:
        got = broker.consume.receive("g", "t", max_messages=10, invisible_seconds=3600)
    finally:
        remove()
    head_reads.clear()
    later = broker.consume.receive("g", "t", max_messages=32)
    assert got and {m.message.queue for m in got} == {got[0].message.queue}
    assert len(got) + len(later) == 11  # nothing leased and left out of an answer
    assert head_reads == [4]  # the short receive does not count as filled by one queue


def test_a_backlog_flow_control_holds_back_costs_an_idle_poll_one_read(
    broker, monkeypatch, head_reads
):
    monkeypatch.setattr(limits, "MAX_LEASES_PER_QUEUE", 2)
    fill_queues(broker, "t", [10, 10, 10, 10])
    for _ in range(8):
        assert len(broker.consume.receive("g", "t", max_messages=1)) == 1
    assert broker.consume.receive("g", "t", max_messages=1) == []
    head_reads.clear()
    for _ in range(4):
        assert broker.consume.receive("g", "t", max_messages=1) == []
    assert head_reads == [4, 4, 4, 4]


def test_a_backlog_on_one_queue_of_four_is_read_with_every_queue_at_once(broker, head_reads):
    fill_queues(broker, "t", [0, 0, 0, 60])
    broker.consume.receive("g", "t", max_messages=4)
    head_reads.clear()
    for _ in range(8):
        assert len(broker.consume.receive("g", "t", max_messages=4)) == 4
    assert head_reads == [4] * 8


def test_the_other_queues_are_served_within_the_receives_deadline(broker, monkeypatch, head_reads):
    """A pass that took its whole time on the first queue answers with what it leased (and
    does not read the others)."""
    fill_queues(broker, "t", [5, 5, 5, 5])
    broker.consume.receive("g", "t", max_messages=1)
    saves_take(monkeypatch, receive_module.MIN_PASS_SECONDS + 0.5)
    head_reads.clear()
    got = broker.consume.receive("g", "t", max_messages=10)
    assert got and len({m.message.queue for m in got}) == 1
    assert head_reads == [1]


def test_the_other_queues_get_what_is_left_of_the_receives_time(broker, monkeypatch):
    """The pass over the other queues ends when the receive's pass would have: its time
    counts from the first queue's start, not from the second read."""
    fill_queues(broker, "t", [5, 5, 5, 5])
    broker.consume.receive("g", "t", max_messages=1)
    saves_take(monkeypatch, receive_module.MIN_PASS_SECONDS * 0.4)
    got = broker.consume.receive("g", "t", max_messages=20)
    assert len({m.message.queue for m in got}) == 3  # the third save ends past the deadline


def saves_take(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Each save of a group's state takes ``seconds`` on the receive's monotonic clock."""
    now = [time.monotonic()]
    monkeypatch.setattr(
        receive_module,
        "time",
        types.SimpleNamespace(monotonic=lambda: now[0], sleep=lambda _: None),
    )
    save = GroupStateStore.save

    def slow_save(self, state, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        now[0] += seconds
        return save(self, state, *args, **kwargs)

    monkeypatch.setattr(GroupStateStore, "save", slow_save)


def test_per_group_fifo_hands_out_the_group_visible_longest_across_queues(broker, clock):
    """A FIFO topic's receive weighs every queue: never one read in turn."""
    broker.admin.create_topic("f", queues=2, message_type=MessageType.FIFO)
    on = {q: [g for g in (f"k{i}" for i in range(200)) if _queue_of(g, 2) == q] for q in (0, 1)}
    for i, group in enumerate(on[1][:6]):
        send(broker, "f", b"b%d" % i, message_group=group)
        clock.advance(1)
    send(broker, "f", b"a", message_group=on[0][0])
    got = []
    for _ in range(7):
        received = broker.consume.receive("G", "f", max_messages=1, per_group=True)
        got += [r.message.body for r in received]
    assert got == [b"b0", b"b1", b"b2", b"b3", b"b4", b"b5", b"a"]


def test_groups_taking_turns_on_a_topic_each_start_at_every_queue(broker):
    """Each group turns through the queues on its own: another group's receives in between
    do not keep it at one queue (where reading in turn would leave the others waiting)."""
    fill_queues(broker, "t", [10, 10])
    served: dict[str, set[int]] = {"g1": set(), "g2": set()}
    for _ in range(3):
        for group in served:
            got = broker.consume.receive(group, "t", max_messages=2)
            served[group] |= {m.message.queue for m in got}
    assert served == {"g1": {0, 1}, "g2": {0, 1}}


def test_a_process_keeps_turns_and_marks_of_a_bounded_number_of_groups(broker, monkeypatch):
    monkeypatch.setattr(receive_module, "TRACKED_PAIRS", 3)
    receiver = broker.consume.subscribe.__self__
    fill_queues(broker, "t", [20, 20])
    for _ in range(2):
        for n in range(6):
            assert len(broker.consume.receive(f"g{n}", "t", max_messages=2)) == 2
            assert len(receiver._starts) <= 3 and len(receiver._fills_from_one._marked) <= 3
    assert receiver._fills_from_one._marked  # marks are still made


def test_marking_a_pair_marked_already_at_the_bound_keeps_the_others(monkeypatch):
    monkeypatch.setattr(receive_module, "TRACKED_PAIRS", 3)
    marks = receive_module._Marks()
    for n in range(3):
        marks.mark((f"g{n}", "t"), True)
    marks.mark(("g0", "t"), True)
    assert all((f"g{n}", "t") in marks for n in range(3))
