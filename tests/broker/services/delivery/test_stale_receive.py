"""A receive that read the group's summary, then stalled while another receive leased the
same messages and the consumer acked them all, must not leave a lease of them behind: its
save fails as a whole, and the acked messages never come back."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from broker_helpers import ack_statuses, send
from cirrusmq_broker.rules.retries import BACKOFF_SECONDS
from cirrusmq_broker.storage.clients import observe_calls

INVISIBLE = 30


def receive(broker) -> list:
    return broker.consume.receive("g", "t", invisible_seconds=INVISIBLE, max_messages=10)


def pause_first_write(paused: threading.Event, resume: threading.Event) -> Callable[[], None]:
    """Stall this thread before its first write of the group's state; returns the undo."""
    thread = threading.get_ident()

    def observe(service: str, operation: str, params: dict) -> None:
        writes = {"UpdateItem", "TransactWriteItems"}
        if threading.get_ident() == thread and operation in writes and not paused.is_set():
            paused.set()
            assert resume.wait(30)

    return observe_calls(observe)


@pytest.mark.parametrize("first_acked", [True, False], ids=["on-summary", "items"])
def test_a_stale_receive_leaves_no_lease_of_messages_acked_meanwhile(broker, clock, first_acked):
    """``items``: the first delivery is still out, its lease on the summary, so the two
    receives' leases are items of their own."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"first")
    [first] = receive(broker)  # the group's summary is stored
    if first_acked:
        assert ack_statuses(broker, "g", [first.receipt_handle]) == ["acked"]
    send(broker, "t", b"a", b"b", b"c")
    paused, resume, answers = threading.Event(), threading.Event(), []

    def stale() -> None:
        undo = pause_first_write(paused, resume)
        try:
            answers.extend(receive(broker))
        finally:
            undo()

    thread = threading.Thread(target=stale)
    thread.start()
    assert paused.wait(30)  # it read the summary and planned a, b, c
    got = receive(broker)
    assert sorted(m.message.body for m in got) == [b"a", b"b", b"c"]
    assert ack_statuses(broker, "g", [m.receipt_handle for m in got]) == ["acked"] * 3
    resume.set()
    thread.join(30)
    assert answers == []
    if not first_acked:
        assert ack_statuses(broker, "g", [first.receipt_handle]) == ["acked"]
    for backoff in BACKOFF_SECONDS[:2]:
        clock.advance(INVISIBLE + backoff + 1)
        assert receive(broker) == []  # acked is final
