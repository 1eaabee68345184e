"""IdleWait: when an idle consumer polls and when it waits on the notification channel."""

from __future__ import annotations

import threading

from cirrusmq.consumer import channel as channel_module
from cirrusmq.consumer.pacing import CHANNEL_AFTER_S, IdleWait


class FakeWaiter:
    def __init__(self, channel, group, topics, event, *, accept=True) -> None:  # noqa: ANN001
        self.channel, self.group, self.topics, self.event = channel, group, topics, event
        self.registered, self.refused, self.accept = False, None, accept
        self.registrations = 0

    def register(self) -> bool:
        self.registrations += 1
        self.registered = self.accept
        return self.accept

    def close(self) -> None:
        pass


class FakeChannel:
    healthy = True

    def __init__(self, accept: bool = True) -> None:
        self.accept = accept
        self.waiters: list[FakeWaiter] = []

    def waiter(self, group, topics, event):  # noqa: ANN001, ANN201
        waiter = FakeWaiter(self, group, tuple(topics), event, accept=self.accept)
        self.waiters.append(waiter)
        return waiter


def test_a_short_delay_polls_without_the_channel() -> None:
    channel = FakeChannel()
    idle = IdleWait(threading.Event(), channel=lambda: channel, group="g", topics=lambda: ["t"])
    assert idle.wait(0.01) is False
    assert channel.waiters == []


def test_an_idle_consumer_registers_polls_once_more_then_waits_on_the_channel(monkeypatch) -> None:
    monkeypatch.setattr(channel_module, "SAFETY_POLL_S", 0.01)
    channel = FakeChannel()
    event = threading.Event()
    idle = IdleWait(event, channel=lambda: channel, group="g", topics=lambda: ["t"])
    assert idle.wait(CHANNEL_AFTER_S) is False  # registered: receive again at once
    (waiter,) = channel.waiters
    assert waiter.registrations == 1 and idle.channel_waits == 0
    assert idle.wait(CHANNEL_AFTER_S) is False  # the safety poll's time passed
    assert idle.channel_waits == 1 and waiter.registrations == 1
    event.set()  # a notification
    assert idle.wait(CHANNEL_AFTER_S) is True


def test_an_unavailable_channel_falls_back_to_the_polling_delay() -> None:
    channel = FakeChannel(accept=False)
    event = threading.Event()
    idle = IdleWait(event, channel=lambda: channel, group="g", topics=lambda: ["t"])
    event.set()  # the fallback is the plain event wait of the polling delay
    assert idle.wait(CHANNEL_AFTER_S) is True
    assert idle.channel_waits == 0


def test_no_channel_at_all_is_plain_polling() -> None:
    idle = IdleWait(threading.Event(), channel=lambda: None, group="g", topics=lambda: ["t"])
    assert idle.wait(0.01) is False
    assert idle.waiter is None


def test_a_rebalance_giving_an_orderly_consumer_new_queues_wakes_its_idle_wait(monkeypatch) -> None:
    """A member left with a backlog in its queues: no append announces it, so the heartbeat
    that allocates them to this consumer ends its (channel) wait, and it receives."""
    from cirrusmq import ConsumeResult, PushConsumer
    from cirrusmq.consumer import membership
    from cirrusmq.consumer.membership import ConsumerInfo

    allocations = iter([(0,), (0, 1), (0, 1)])

    def fake_heartbeat(transport, group, client_id, subscriptions, **_):  # noqa: ANN001, ANN202
        queues = {"t": next(allocations)}
        return ConsumerInfo(client_id, True, 0, 0, queues, {"t": "*"})

    monkeypatch.setattr(membership, "heartbeat", fake_heartbeat)
    consumer = PushConsumer(
        "http://fake", None, "g", ["t"], lambda m: ConsumeResult.SUCCESS, orderly=True
    )
    try:
        beater = consumer._heartbeater
        beater.beat()  # the first allocation
        consumer._wake.clear()
        beater.beat()  # queue 1 is now this consumer's
        assert consumer._wake.is_set()
        consumer._wake.clear()
        beater.beat()  # unchanged: no wake-up
        assert not consumer._wake.is_set()
    finally:
        consumer._idle.close()
