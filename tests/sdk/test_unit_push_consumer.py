"""PushConsumer's lifecycle and failure handling, against a fake consume API."""

from __future__ import annotations

import threading
import time

import cirrusmq.push_consumer as push_module
import pytest
from cirrusmq import ConsumeResult, MessageView, PushConsumer
from cirrusmq.transport import RetryPolicy, Transport

from .fake_group import FakeGroupService
from .helpers import wait_until

FAST = RetryPolicy(max_attempts=2, initial_backoff_ms=1, max_backoff_ms=2)


class Listener:
    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.seen: list[str] = []
        self.started = threading.Event()

    def __call__(self, message: MessageView) -> ConsumeResult:
        self.seen.append(message.receipt_handle)
        self.started.set()
        if self.gate is not None:
            self.gate.wait(10)
        return ConsumeResult.SUCCESS


def consumer(service: FakeGroupService, listener, **options) -> PushConsumer:
    transport = Transport("http://fake", retry=FAST, http_transport=service.transport())
    return PushConsumer("http://fake", None, "g", ["t"], listener, transport=transport, **options)


class OwnedTransports(list):
    service = FakeGroupService()


@pytest.fixture
def owned_transports(monkeypatch) -> OwnedTransports:
    """Transports the push consumers of the test make (and own), on ``.service``."""
    made = OwnedTransports()
    made.service = service = FakeGroupService()

    def make(endpoint, credentials, **options):
        made.append(Transport(endpoint, credentials, http_transport=service.transport(), **options))
        return made[-1]

    monkeypatch.setattr(push_module, "Transport", make)
    return made


def test_a_push_consumer_needs_a_subscription():
    with pytest.raises(ValueError, match="at least one subscription"):
        PushConsumer("http://fake", None, "g", {}, Listener())


def test_shutting_down_a_consumer_never_started_closes_its_transport(owned_transports):
    PushConsumer("http://fake", None, "g", ["t"], Listener()).shutdown()
    assert owned_transports[0]._closed.is_set()


def test_the_fetcher_survives_unexpected_errors():
    service = FakeGroupService()
    service.malformed_receives = 2  # KeyError in receive, not an MQError
    service.add("h1")
    listener = Listener()
    with consumer(service, listener, await_duration_s=0.2):
        wait_until(lambda: service.acked == ["h1"], timeout_s=5)
    assert listener.seen == ["h1"]


def test_the_acker_survives_unexpected_errors():
    service = FakeGroupService()
    service.crash_acks = 1
    service.add("h1")
    listener = Listener()
    c = consumer(service, listener, await_duration_s=0.2).start()
    wait_until(lambda: listener.seen == ["h1"])
    time.sleep(0.2)  # the first ack crashed: h1 waits for a retry
    service.add("h2")
    wait_until(lambda: "h2" in service.acked, timeout_s=5)  # the acker lives on
    c._retrier.retry_now()
    wait_until(lambda: sorted(service.acked) == ["h1", "h2"], timeout_s=5)
    c.shutdown()


def test_bad_receipt_handles_do_not_drop_the_other_acks():
    service = FakeGroupService()
    good = [f"h{i}" for i in range(10)]
    service.add(*good[:5], "bad-1", "foreign-1", *good[5:])
    listener = Listener()
    with consumer(service, listener, await_duration_s=0.2, consume_threads=1):
        wait_until(lambda: len(listener.seen) == 12)
        wait_until(lambda: sorted(service.acked) == sorted(good), timeout_s=5)
    assert sorted(service.acked) == sorted(good)


def test_a_listener_finishing_after_shutdown_is_still_acked(owned_transports):
    service = owned_transports.service
    gate = threading.Event()
    listener = Listener(gate)
    c = PushConsumer("http://fake", None, "g", ["t"], listener, await_duration_s=0.5).start()
    service.add("slow")
    assert listener.started.wait(5)
    c.shutdown(timeout_s=0.1)  # the listener is still busy
    assert service.acked == []
    transport = owned_transports[0]
    assert not transport._closed.is_set()  # the listener still needs it
    gate.set()
    wait_until(lambda: service.acked == ["slow"], timeout_s=5)
    wait_until(transport._closed.is_set, timeout_s=5)


def test_an_idle_shutdown_does_not_wait_for_the_long_poll_and_releases_what_it_brings():
    service = FakeGroupService()
    listener = Listener()
    c = consumer(service, listener, await_duration_s=5).start()
    wait_until(lambda: service.receives == 1)
    time.sleep(0.1)  # in the long poll
    started = time.monotonic()
    c.shutdown()
    assert time.monotonic() - started < 1
    service.add("late")  # the poll in progress gets it after the shutdown
    wait_until(lambda: service.invisible == [("late", 10)], timeout_s=5)
    assert listener.seen == [] and service.acked == []
