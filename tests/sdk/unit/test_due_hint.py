"""An empty receive's ``next_due_ms``: something the consumer cannot see yet (another
consumer's lease, a retry in its backoff) may become receivable then, and no notification
announces it. A consumer idle on the notification channel ends its wait by then and
receives. The fake channel below never notifies: only the hint can end the wait."""

from __future__ import annotations

import asyncio
import threading

import cirrusmq.consumer.aio as aio_module
import cirrusmq.consumer.push as push_module
import cirrusmq.consumer.simple as simple_module
import pytest
from cirrusmq import ConsumeResult, PushConsumer, SimpleConsumer
from cirrusmq.aio import AsyncSimpleConsumer
from cirrusmq.message import parse_receive_due
from cirrusmq.transport import AsyncTransport, RetryPolicy, Transport

from ..helpers import wait_until
from .fake_group import FakeGroupService
from .test_idle_wait import FakeChannel

FAST = RetryPolicy(max_attempts=2, initial_backoff_ms=1, max_backoff_ms=2)
AWAIT_S = 20


class RecordingEvent(threading.Event):
    """The idle wait's event, recording how long each wait on it may last."""

    def __init__(self) -> None:
        super().__init__()
        self.limits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.limits.append(timeout if timeout is not None else float("inf"))
        return super().wait(timeout)


def ends_by_the_due(event: RecordingEvent) -> bool:
    """Whether a channel wait was set to end by the hint (1 s, plus the 1 s slack), not
    at the end of the receive's await."""
    return any(limit <= 3 for limit in event.limits)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"messages": []}, None),  # an older service leaves it out
        ({"messages": [], "next_due_ms": None}, None),
        ({"messages": [], "next_due_ms": "soon"}, None),
        ({"messages": [], "next_due_ms": True}, None),
        ({"messages": [], "next_due_ms": -5}, None),
        ({"messages": [], "next_due_ms": 5000}, 5.0),
        ({"messages": [], "next_due_ms": 2500.0}, 2.5),
        ({"messages": [], "next_due_ms": 10}, 1.0),  # never a tight loop: at least 1 s
        ([], None),
        ({"messages": [], "next_due_ms": float("nan")}, None),
        ({"messages": [], "next_due_ms": float("inf")}, None),  # JSON's Infinity
        ({"messages": [], "next_due_ms": 10**400}, None),  # no float holds it
    ],
)
def test_the_due_hint_is_read_tolerantly(body, expected) -> None:
    assert parse_receive_due(body) == expected


def fake_transport(service: FakeGroupService) -> Transport:
    return Transport(
        "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
    )


def test_a_simple_receive_waiting_on_the_channel_receives_again_when_something_is_due(
    monkeypatch,
) -> None:
    channel = FakeChannel()
    monkeypatch.setattr(simple_module, "channel_for", lambda transport: channel)
    service = FakeGroupService()
    service.next_due = 1000
    consumer = SimpleConsumer(
        "http://fake",
        None,
        "g",
        ["t"],
        AWAIT_S,
        transport=fake_transport(service),
        notifications=True,
    )
    consumer._idle.event = event = RecordingEvent()
    result: list = []
    receiver = threading.Thread(target=lambda: result.extend(consumer.receive(10)))
    try:
        receiver.start()
        assert wait_until(lambda: consumer._idle.channel_waits > 0, timeout_s=30)
        service.add("h1")  # no notification: only the hint ends the channel wait
        receiver.join(60)
        assert [m.receipt_handle for m in result] == ["h1"]
        assert ends_by_the_due(event)
    finally:
        consumer._idle.event.set()
        receiver.join(60)
        consumer.close()


def test_an_async_receive_waiting_on_the_channel_receives_again_when_something_is_due(
    monkeypatch,
) -> None:
    channel = FakeChannel()
    monkeypatch.setattr(aio_module, "channel_for", lambda transport: channel)
    service = FakeGroupService()
    service.next_due = 1000
    event = RecordingEvent()

    async def scenario() -> list:
        transport = AsyncTransport(
            "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
        )
        consumer = AsyncSimpleConsumer(
            "http://fake", None, "g", ["t"], AWAIT_S, transport=transport, notifications=True
        )
        consumer._idle.event = event
        try:
            receiving = asyncio.create_task(consumer.receive(10))
            for _ in range(600):
                if consumer._idle.channel_waits:
                    break
                await asyncio.sleep(0.05)
            service.add("h1")
            return await asyncio.wait_for(receiving, 60)
        finally:
            await consumer.close()
            await transport.close()

    assert [m.receipt_handle for m in asyncio.run(scenario())] == ["h1"]
    assert ends_by_the_due(event)


def test_an_idle_push_consumer_on_the_channel_receives_when_something_is_due(monkeypatch) -> None:
    channel = FakeChannel()
    monkeypatch.setattr(push_module, "channel_for", lambda transport: channel)
    service = FakeGroupService()
    service.next_due = 1000
    seen = threading.Event()

    def listener(message) -> ConsumeResult:  # noqa: ANN001
        seen.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        "http://fake", None, "g", ["t"], listener, transport=fake_transport(service)
    )
    consumer.start()
    try:
        assert wait_until(lambda: consumer._idle.channel_waits > 0, timeout_s=30)
        service.add("h1")  # the safety poll is minutes away: only the hint wakes it
        assert seen.wait(60)
    finally:
        consumer.shutdown(10)
