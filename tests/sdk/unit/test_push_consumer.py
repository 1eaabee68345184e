"""PushConsumer's lifecycle and failure handling, against a fake consume API."""

from __future__ import annotations

import threading
import time

import cirrusmq.consumer.push as push_module
import pytest
from cirrusmq import (
    BroadcastConsumer,
    ConsumeResult,
    MessageModel,
    MessageView,
    PushConsumer,
    SubscriptionConflictError,
)
from cirrusmq.transport import RetryPolicy, Transport

from ..helpers import wait_until
from .fake_group import FakeGroupService

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
    transport = Transport(
        "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
    )
    return PushConsumer("http://fake", None, "g", ["t"], listener, transport=transport, **options)


class OwnedTransports(list):
    service = FakeGroupService()


@pytest.fixture
def owned_transports(monkeypatch) -> OwnedTransports:
    """Transports the push consumers of the test make (and own), on ``.service``."""
    made = OwnedTransports()
    made.service = service = FakeGroupService()

    def make(endpoint, credentials, **options):
        made.append(
            Transport(endpoint, service.credentials, http_transport=service.transport(), **options)
        )
        return made[-1]

    monkeypatch.setattr(push_module, "Transport", make)
    return made


def test_a_push_consumer_needs_a_subscription():
    with pytest.raises(ValueError, match="at least one subscription"):
        PushConsumer("http://fake", None, "g", {}, Listener())


def test_a_step_per_batch_needs_an_exactly_once_producer():
    with pytest.raises(ValueError, match="step_per_batch needs an exactly_once producer"):
        PushConsumer("http://fake", None, "g", ["t"], Listener(), step_per_batch=True)


def test_shutting_down_a_consumer_never_started_closes_its_transport(owned_transports):
    PushConsumer("http://fake", None, "g", ["t"], Listener()).shutdown()
    assert owned_transports[0]._closed.is_set()


def test_the_fetcher_survives_unexpected_errors():
    service = FakeGroupService()
    service.malformed_receives = 2  # KeyError in receive, not an MQError
    service.add("h1")
    listener = Listener()
    with consumer(service, listener):
        wait_until(lambda: service.acked == ["h1"], timeout_s=5)
    assert listener.seen == ["h1"]


def test_the_acker_survives_unexpected_errors():
    service = FakeGroupService()
    service.crash_acks = 1
    service.add("h1")
    listener = Listener()
    c = consumer(service, listener).start()
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
    with consumer(service, listener, consume_threads=1):
        wait_until(lambda: len(listener.seen) == 12)
        wait_until(lambda: sorted(service.acked) == sorted(good), timeout_s=5)
    assert sorted(service.acked) == sorted(good)


def test_a_listener_finishing_after_shutdown_is_still_acked(owned_transports):
    service = owned_transports.service
    gate = threading.Event()
    listener = Listener(gate)
    c = PushConsumer("http://fake", None, "g", ["t"], listener).start()
    service.add("slow")
    assert listener.started.wait(5)
    c.shutdown(timeout_s=0.1)  # the listener is still busy
    assert service.acked == []
    transport = owned_transports[0]
    assert not transport._closed.is_set()  # the listener still needs it
    gate.set()
    wait_until(lambda: service.acked == ["slow"], timeout_s=5)
    wait_until(transport._closed.is_set, timeout_s=5)


def test_an_idle_consumer_never_long_polls_and_shuts_down_at_once():
    service = FakeGroupService()
    listener = Listener()
    c = consumer(service, listener, max_poll_interval_s=3600).start()
    wait_until(lambda: service.receives >= 3)  # idle: 50 ms, 100 ms, ... apart
    c.shutdown()  # an hour-long idle wait would hang here: it is an Event wait
    assert set(service.waits) == {0}  # no server-side long poll
    assert listener.seen == [] and service.acked == []


def test_a_message_arriving_while_idle_is_delivered():
    service = FakeGroupService()
    listener = Listener()
    with consumer(service, listener, max_poll_interval_s=0.2):
        wait_until(lambda: service.receives >= 3)
        service.add("late")
        wait_until(lambda: service.acked == ["late"], timeout_s=10)
    assert listener.seen == ["late"] and set(service.waits) == {0}


def test_await_duration_s_is_not_a_push_consumer_option():
    """The push consumer never long-polls (see max_poll_interval_s): the option is gone."""
    with pytest.raises(TypeError, match="await_duration_s"):
        PushConsumer("http://fake", None, "g", ["t"], Listener(), await_duration_s=5)


@pytest.mark.parametrize("legacy", [False, True], ids=["results", "legacy"])
def test_expired_and_invalid_acks_are_dropped_not_retried(legacy):
    service = FakeGroupService()
    service.legacy_acks = legacy
    good = [f"h{i}" for i in range(6)]
    service.add(*good[:3], "stale-1", "bad-1", "foreign-1", *good[3:])
    listener = Listener()
    c = consumer(service, listener, consume_threads=1).start()
    wait_until(lambda: len(listener.seen) == 9)
    wait_until(lambda: sorted(service.acked) == sorted(good), timeout_s=5)
    c.shutdown()
    assert c._retrier.pending() == 0  # final: nothing kept for a retry
    requests = service.ack_requests
    c._retrier.flush_once()
    assert service.ack_requests == requests


def test_a_subscription_conflict_stops_fetching_clearly(caplog):
    service = FakeGroupService()
    service.subscriptions["t"] = "TagA"  # recorded by another consumer of the group
    c = consumer(service, Listener()).start()
    wait_until(lambda: c.fetch_error is not None)
    c.shutdown()
    assert isinstance(c.fetch_error, SubscriptionConflictError)
    assert (c.fetch_error.subscribed, c.fetch_error.requested) == ("TagA", "*")
    assert service.receives == 1  # no spinning
    assert "group subscribe" in caplog.text


def test_a_broadcasting_push_consumer_is_an_instance_of_the_class_called(tmp_path):
    """PushConsumer(..., BROADCASTING) builds the broadcast consumer, a PushConsumer subclass:
    what users get is an instance of what they called."""
    transport = Transport("http://fake", None)  # not started: no request is made
    consumer = PushConsumer(
        "http://fake", None, "g", ["t"], Listener(), message_model=MessageModel.BROADCASTING,
        offset_store_path=tmp_path / "offsets.db", transport=transport,
    )  # fmt: skip
    try:
        assert isinstance(consumer, PushConsumer)
        assert isinstance(consumer, BroadcastConsumer)
        assert type(PushConsumer("http://fake", None, "g", ["t"], Listener())) is PushConsumer
    finally:
        consumer.shutdown()
        transport.close()


@pytest.mark.parametrize("durable", [False, True], ids=["memory", "sqlite"])
def test_shutdown_with_acks_the_service_cannot_take_finishes(durable, tmp_path):
    """Acks still pending at shutdown (the service unreachable) are logged or kept: the
    shutdown itself completes (the ack store is closed, so its file can be opened again)."""
    service = FakeGroupService()
    gate = threading.Event()
    listener = Listener(gate)
    path = tmp_path / "acks.db" if durable else None
    c = consumer(
        service, listener, heartbeat_interval_s=None, outbox_path=path, consume_threads=1
    ).start()
    service.add("h1")
    assert listener.started.wait(5)
    service.down = True  # the ack of h1 cannot reach the service
    gate.set()
    c.shutdown(timeout_s=5)
    assert service.acked == []
    if durable:  # the file was released: another client may open it (and finds the ack)
        from cirrusmq.consumer.pending_acks import SqlitePendingAcks

        store = SqlitePendingAcks(path)
        try:
            assert store.count() == 1
        finally:
            store.close()


# ---------------------------------------------------------------- acks riding on receives
@pytest.fixture
def patient_acker(monkeypatch) -> None:
    """Successes wait (up to 30 s) for a receive to carry them: which path acked is certain."""
    monkeypatch.setattr(push_module, "_ACK_RIDE_S", 30.0)


def test_successes_ride_on_the_next_receive(patient_acker):
    service = FakeGroupService()
    service.add("h1", "h2", "h3")
    listener = Listener()
    c = consumer(service, listener, max_poll_interval_s=0.05).start()
    wait_until(lambda: sorted(service.acked) == ["h1", "h2", "h3"], timeout_s=10)
    c.shutdown()
    assert sorted(service.riding_acks) == ["h1", "h2", "h3"]
    assert service.ack_requests == 0  # no request of their own
    assert c._retrier.pending() == 0


def test_expired_and_invalid_acks_that_rode_are_dropped_not_retried(patient_acker):
    service = FakeGroupService()
    service.add("h1", "stale-1", "bad-1", "h2")
    listener = Listener()
    c = consumer(service, listener, consume_threads=1, max_poll_interval_s=0.05).start()
    wait_until(lambda: sorted(service.acked) == ["h1", "h2"], timeout_s=10)
    wait_until(lambda: len(service.riding_acks) == 4, timeout_s=10)
    c.shutdown()
    assert c._retrier.pending() == 0  # final: nothing kept for a retry
    assert service.ack_requests == 0


def test_acks_of_a_failed_receive_go_on_their_own_and_none_is_lost(patient_acker):
    service = FakeGroupService()
    gate = threading.Event()
    listener = Listener(gate)
    c = consumer(service, listener, consume_threads=1, max_poll_interval_s=0.05).start()
    service.add("h1")
    assert listener.started.wait(5)
    service.fail_receives = 100  # every receive fails from now on (two attempts each)
    gate.set()
    wait_until(lambda: service.acked == ["h1"], timeout_s=10)
    assert service.ack_requests >= 1 and service.riding_acks == []
    service.fail_receives = 0
    service.add("h2")
    wait_until(lambda: sorted(service.acked) == ["h1", "h2"], timeout_s=10)
    c.shutdown()
    assert c._retrier.pending() == 0


def test_a_service_refusing_acks_on_receives_gets_them_on_their_own(patient_acker):
    service = FakeGroupService()
    service.legacy_acks = True  # a service before acks rode on receives
    service.add("h1", "h2")
    listener = Listener()
    c = consumer(service, listener, max_poll_interval_s=0.05).start()
    wait_until(lambda: sorted(service.acked) == ["h1", "h2"], timeout_s=10)
    service.add("h3")  # fetching goes on (acks no longer ride)
    wait_until(lambda: sorted(service.acked) == ["h1", "h2", "h3"], timeout_s=10)
    c.shutdown()
    assert service.riding_acks == [] and not c._consumer.acks_ride


def test_successes_no_receive_carries_are_acked_on_their_own(monkeypatch):
    """An idle fetcher (an hour between polls) never holds an ack: the acker sends it."""
    monkeypatch.setattr(push_module, "_INITIAL_POLL_INTERVAL_S", 3600.0)
    service = FakeGroupService()
    gate = threading.Event()
    listener = Listener(gate)
    service.add("h1")
    c = consumer(service, listener, max_poll_interval_s=3600).start()
    assert listener.started.wait(5)
    wait_until(lambda: service.receives >= 2)  # then idle: the next poll is an hour off
    gate.set()
    wait_until(lambda: service.acked == ["h1"], timeout_s=10)
    c.shutdown()
    assert service.ack_requests >= 1


def test_successes_riding_from_more_queues_than_one_ack_spans_are_all_acked(patient_acker):
    service = FakeGroupService()
    handles = [f"q{n}-m" for n in range(250)]  # 250 queues: over the 100 one ack may span
    service.add(*handles)
    service.receive_gate, service.receives_before_gate = threading.Event(), 1
    listener = Listener()
    c = consumer(
        service, listener, receive_batch_size=250, max_cached_messages=250,
        max_poll_interval_s=0.05,
    ).start()  # fmt: skip
    try:
        # the second receive waits while all 250 succeed: it or the third carries >= 125
        wait_until(lambda: len(listener.seen) == 250 and c.cached_messages == 0, timeout_s=10)
        service.receive_gate.set()
        wait_until(lambda: sorted(service.acked) == sorted(handles), timeout_s=10)
        assert c._consumer.acks_ride  # the acks' own mistake: acks still ride
    finally:
        service.receive_gate.set()
        c.shutdown()
    assert c._retrier.pending() == 0


def test_a_success_riding_on_a_receive_shutdown_did_not_wait_for_is_kept_in_the_outbox(
    patient_acker, tmp_path
):
    """The receive carrying the ack outlives shutdown's timeout, then fails with the service
    unreachable: the ack is in the durable outbox, as the acker keeps the others."""
    from cirrusmq.consumer.pending_acks import SqlitePendingAcks

    service = FakeGroupService()
    service.ride_gate = threading.Event()
    path = tmp_path / "acks.db"
    c = consumer(
        service, Listener(), heartbeat_interval_s=None, outbox_path=path, consume_threads=1,
        max_poll_interval_s=0.05,
    ).start()  # fmt: skip
    try:
        service.add("h1")
        wait_until(lambda: service.riding_held == 1, timeout_s=10)  # h1's ack is in flight
        service.fail_receives = 100  # the receive fails once let through
        service.down = True  # and so does any ack of its own
        c.shutdown(timeout_s=0.2)
    finally:
        service.ride_gate.set()
    wait_until(lambda: c._fetcher_done, timeout_s=10)
    assert service.acked == []
    store = SqlitePendingAcks(path)
    try:
        assert store.count() == 1  # kept for the next run, not lost
    finally:
        store.close()
