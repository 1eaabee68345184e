"""A receive that its first queue in turn can fill reads that queue alone (its head and the
group's summary there); when that queue falls short it reads the others, in one more call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cirrusmq_broker.storage.clients import observe_calls
from test_delivery import fill_queues


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
