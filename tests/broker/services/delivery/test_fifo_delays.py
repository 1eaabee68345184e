"""A FIFO message sent with a not-before time (SQS's FIFO queue DelaySeconds) is stored at
once, in its group's order, and is not handed out before that time; while it waits it holds
its message group (nothing after it of the group goes first), and other groups flow."""

from __future__ import annotations

import threading

import pytest
from broker_helpers import crashing_at, create_fifo_topic, statuses
from cirrusmq_broker.errors import DelayNotAllowed
from cirrusmq_broker.model import MessageInput


def bodies(received) -> list[bytes]:
    return [r.message.body for r in received]


def delayed_head(broker, clock, topic: str = "f") -> None:
    """a0 (due in 30 s), b0, a1, b1 (due now) on the topic's one queue (offsets 0-3)."""
    create_fifo_topic(broker, topic, queues=1)
    for body, delay_s in ((b"a0", 30), (b"b0", 0), (b"a1", 0), (b"b1", 0)):
        message = MessageInput(
            body,
            message_group=body[:1].decode(),
            not_before=clock.now + delay_s * 1000 if delay_s else None,
        )
        broker.produce.send(topic, [message])


def test_a_delayed_head_holds_its_group_while_another_group_flows(broker, clock):
    delayed_head(broker, clock)
    first = broker.consume.receive("G", "f", max_messages=10)
    assert bodies(first) == [b"b0", b"b1"]  # a0 not due: a1 waits behind it
    broker.consume.ack("G", [r.receipt_handle for r in first])
    assert broker.consume.receive("G", "f", max_messages=10) == []
    clock.advance(31)
    due = broker.consume.receive("G", "f", max_messages=10)
    assert bodies(due) == [b"a0", b"a1"]
    broker.consume.ack("G", [r.receipt_handle for r in due])
    [queue] = statuses(broker, "G")
    assert (queue.committed_offset, queue.inflight) == (4, 0)


def test_a_delayed_message_behind_an_undelayed_one_of_its_group_waits_for_its_time(broker, clock):
    create_fifo_topic(broker, "f", queues=1)
    broker.produce.send("f", [MessageInput(b"a0", message_group="a")])
    later = MessageInput(b"a1", message_group="a", not_before=clock.now + 30_000)
    broker.produce.send("f", [later])
    [a0] = broker.consume.receive("G", "f", max_messages=10)
    broker.consume.ack("G", [a0.receipt_handle])
    assert broker.consume.receive("G", "f", max_messages=10) == []
    clock.advance(31)
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"a1"]


def test_a_receive_crashed_at_any_call_loses_nothing_behind_a_delayed_head(broker, clock):
    delayed_head(broker, clock)
    start = clock.now
    for n in range(40):
        group = f"G{n}"
        clock.now = start
        got: list = []
        died = crashing_at(
            n,
            lambda got=got, group=group: got.extend(
                broker.consume.receive(group, "f", max_messages=10)
            ),
        )
        if not died:
            assert bodies(got) == [b"b0", b"b1"]
            break
        seen: list[bytes] = []
        for _ in range(6):
            more = broker.consume.receive(group, "f", max_messages=10)
            seen += bodies(more)
            if more:
                broker.consume.ack(group, [r.receipt_handle for r in more])
            else:
                clock.advance(31)
        assert sorted(seen) == [b"a0", b"a1", b"b0", b"b1"], n
        assert seen.index(b"a0") < seen.index(b"a1"), n
        assert seen.index(b"b0") < seen.index(b"b1"), n
        [queue] = statuses(broker, group)
        assert (queue.committed_offset, queue.inflight) == (4, 0), n
    else:
        raise AssertionError("the receive never completed")


def test_a_long_poll_returns_a_message_that_becomes_due_while_it_waits(broker, clock):
    create_fifo_topic(broker, "f", queues=1)
    soon = MessageInput(b"soon", message_group="a", not_before=clock.now + 30_000)
    broker.produce.send("f", [soon])
    assert broker.consume.receive("G", "f", max_messages=10) == []
    timer = threading.Timer(0.3, lambda: clock.advance(31))
    timer.start()
    try:
        got = broker.consume.receive("G", "f", max_messages=10, wait_seconds=5)
    finally:
        timer.join()
    assert bodies(got) == [b"soon"]


def test_a_not_before_time_is_for_fifo_topics_only(broker, clock):
    broker.admin.create_topic("t", queues=1)
    with pytest.raises(DelayNotAllowed):
        broker.produce.send("t", [MessageInput(b"x", not_before=clock.now + 1000)])


def test_polls_before_a_held_message_is_due_read_only_the_queue_view(broker, clock):
    from cirrusmq_broker.storage.clients import observe_calls

    delayed_head(broker, clock)
    create_fifo_topic(broker, "idle", queues=1)
    first = broker.consume.receive("G", "f", max_messages=10)
    broker.consume.ack("G", [r.receipt_handle for r in first])
    assert broker.consume.receive("G", "f", max_messages=10) == []

    def calls(topic: str) -> list[str]:
        made: list[str] = []
        remove = observe_calls(lambda service, op, _: made.append(op))
        try:
            assert broker.consume.receive("G", topic, max_messages=10) == []
        finally:
            remove()
        return made

    calls("idle")  # its subscription recorded
    clock.advance(10)
    assert calls("f") == calls("idle")  # a0 due in 20 s: no lookup of it, no lease read
    clock.advance(21)
    assert bodies(broker.consume.receive("G", "f", max_messages=10)) == [b"a0", b"a1"]


def test_an_empty_receive_names_when_a_held_delayed_message_becomes_due(broker, clock):
    """A consumer idle on its channel wakes at an empty receive's ``next_due_ms``: a FIFO
    message held for its not-before time is announced by no notification when it becomes
    due, so the hint must name that time (else the consumer waits for its safety poll)."""
    create_fifo_topic(broker, "f", queues=1)
    due = clock.now + 30_000
    broker.produce.send("f", [MessageInput(b"a0", message_group="a", not_before=due)])
    hints: list[int] = []
    assert broker.consume.receive("G", "f", max_messages=10, due_hint=hints.append) == []
    assert hints == [due - clock.now]  # ms from now


def test_the_due_hint_names_a_delayed_message_due_before_a_delivery_in_flight_ends(broker, clock):
    create_fifo_topic(broker, "f", queues=1)
    broker.produce.send("f", [MessageInput(b"a0", message_group="a")])
    due = clock.now + 30_000
    broker.produce.send("f", [MessageInput(b"b0", message_group="b", not_before=due)])
    assert bodies(broker.consume.receive("G", "f", max_messages=1)) == [b"a0"]  # 60 s lease
    hints: list[int] = []
    assert broker.consume.receive("G", "f", max_messages=10, due_hint=hints.append) == []
    assert hints == [due - clock.now]


def test_the_log_index_counts_the_messages_still_held_by_their_not_before_time(broker, clock):
    """What an attributes call counts as delayed: held batches from an offset on, until due."""
    delayed_head(broker, clock)
    since = clock.now - 60_000

    def held(from_offset: int = 0) -> int:
        return broker.index.held_count(
            "f", 0, now=clock.now, stored_since=since, from_offset=from_offset
        )

    assert (held(), held(from_offset=1)) == (1, 0)
    clock.advance(31)
    assert held() == 0
