"""A receive that fails part-way (429 Throttled, 503 StorageUnavailable) answers with what
it leased already, here or in an earlier part of the same receive (the due retries, the
queue it read first), rather than leave it invisible for the lease's whole time."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from broker_helpers import send
from cirrusmq_broker.errors import StorageUnavailable, Throttled
from cirrusmq_broker.rules.retries import BACKOFF_SECONDS
from cirrusmq_broker.storage.clients import observe_calls
from test_delivery import fill_queues


def fail_call(operations: set[str], nth: int, error: type[Exception]) -> Callable[[], None]:
    """The ``nth`` AWS call of ``operations`` from now on raises ``error``; returns the undo."""
    count = 0

    def observe(service: str, operation: str, params: dict) -> None:
        nonlocal count
        if operation in operations:
            count += 1
            if count == nth:
                raise error("injected")

    return observe_calls(observe)


def receive_with(failing: Callable[[], None], broker, **options) -> list:
    try:
        return broker.consume.receive("g", "t", invisible_seconds=3600, **options)
    finally:
        failing()


@pytest.mark.parametrize("error", [Throttled, StorageUnavailable])
@pytest.mark.parametrize(
    "operations", [{"TransactWriteItems", "UpdateItem"}, {"GetObject"}], ids=["save", "object"]
)
def test_a_failure_on_the_other_queues_hands_out_what_the_first_leased(broker, error, operations):
    fill_queues(broker, "t", [3, 3, 3, 3])
    broker.consume.receive("g", "t", max_messages=1)  # reads in turn from now on
    got = receive_with(fail_call(operations, 2, error), broker, max_messages=10)
    later = broker.consume.receive("g", "t", max_messages=32)
    assert len(got) == 3 and len(got) + len(later) == 11


@pytest.mark.parametrize("error", [Throttled, StorageUnavailable])
def test_a_failed_object_read_in_one_pass_hands_out_what_it_leased(broker, error):
    fill_queues(broker, "t", [3, 3, 3, 3])  # a new group reads every queue at once
    got = receive_with(fail_call({"GetObject"}, 2, error), broker, max_messages=10)
    later = broker.consume.receive("g", "t", max_messages=32)
    assert len(got) == 3 and len(got) + len(later) == 12


@pytest.mark.parametrize("error", [Throttled, StorageUnavailable])
def test_a_failure_on_the_topics_queues_hands_out_the_due_retries(broker, clock, error):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    assert broker.consume.receive("g", "t") == []  # a poll at expiry moves it to retry
    send(broker, "t", b"y")
    clock.advance(BACKOFF_SECONDS[0])
    got = receive_with(fail_call({"GetObject"}, 2, error), broker, max_messages=10)
    assert [m.message.body for m in got] == [b"x"]
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"y"]
