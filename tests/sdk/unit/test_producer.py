"""The producers' batching, retry, ordering and outbox rules, against a fake service."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import cirrusmq.producer.producer as producer_module
import httpx
import pytest
from cirrusmq import (
    AsyncProducer,
    BadRequestError,
    ClientClosedError,
    Message,
    OutboxFullError,
    Producer,
    TransportError,
)
from cirrusmq.outbox import SqliteOutbox
from cirrusmq.transport import AsyncTransport, RetryPolicy, Transport

from .fake_service import FakeService

FAST = RetryPolicy(max_attempts=3, initial_backoff_ms=1, max_backoff_ms=5)


def producer(service: FakeService, **options) -> Producer:
    transport = Transport(
        "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
    )
    p = Producer("http://fake", transport=transport, **options)
    p.outbox_retry_max_s = 0.05
    return p


def wait_until(condition, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_async_sends_are_batched_and_keep_their_order():
    service = FakeService()
    with producer(service, max_batch_messages=100, linger_ms=60_000) as p:  # full batches only
        futures = [p.send_async(Message("t", f"{i}")) for i in range(1000)]
        receipts = [f.result(timeout=10) for f in futures]
    assert len(service.requests) <= 15
    assert service.bodies("t") == [str(i) for i in range(1000)]
    assert [r.offset for r in receipts] == list(range(1000))
    sequences = [r["sequence"] for r in service.requests]
    assert sequences == sorted(sequences) and len({r["producer_id"] for r in service.requests}) == 1


def test_send_batch_is_one_request_and_receipts_are_in_order():
    service = FakeService()
    with producer(service) as p:
        receipts = p.send_batch([Message("t", f"{i}") for i in range(50)])
    assert len(service.requests) == 1
    assert [r.offset for r in receipts] == list(range(50))
    assert receipts[0].message_id == service.requests[0]["messages"][0]["message_id"]


def test_retries_resend_the_same_request():
    service = FakeService()
    service.fail_next = [(503, "Busy"), (500, "InternalError")]
    with producer(service) as p:
        p.send(Message("t", "x"))
    assert service.bodies("t") == ["x"]


def test_a_refused_batch_fails_its_messages_only():
    service = FakeService()
    with producer(service) as p:
        service.fail_next = [(400, "InvalidMessage")]
        with pytest.raises(BadRequestError, match="InvalidMessage"):
            p.send(Message("t", "bad"))
        assert p.send(Message("t", "good")).offset == 0


def test_without_outbox_an_unreachable_service_raises():
    service = FakeService()
    service.down = True
    with producer(service, max_attempts=2) as p:
        with pytest.raises(TransportError):
            p.send(Message("t", "lost"))
        assert len(service.requests) == 0
    with pytest.raises(ClientClosedError):
        p.send(Message("t", "after close"))


def test_close_reports_what_it_could_not_send_in_time():
    # The request on the wire gets request_timeout_s to end: its outcome is known then, and
    # only the message that never left is reported (its resend cannot duplicate anything).
    service = FakeService()
    service.hold.clear()  # the service hangs...
    p = producer(service, request_timeout_s=5)
    on_the_wire = p.send_async(Message("t", "on the wire"))
    wait_until(lambda: service.arrived == 1)
    queued = p.send_async(Message("t", "queued"))  # behind it: never sent
    threading.Timer(0.3, service.hold.set).start()  # ...and answers after a while
    unsent = p.close(timeout_s=0.1)
    assert [m.body for m in unsent] == [b"queued"]
    assert isinstance(queued.exception(timeout=1), ClientClosedError)
    assert on_the_wire.result(timeout=0).offset == 0
    assert service.bodies("t") == ["on the wire"]


def test_a_request_still_on_the_wire_after_close_resolves_its_future_later(monkeypatch):
    service = FakeService()
    service.hold.clear()
    made: list[Transport] = []

    def owned_transport(endpoint, credentials, **options):  # the producer makes (and owns) it
        made.append(
            Transport(endpoint, service.credentials, http_transport=service.transport(), **options)
        )
        return made[-1]

    monkeypatch.setattr(producer_module, "Transport", owned_transport)
    p = Producer("http://fake", request_timeout_s=0.2)
    future = p.send_async(Message("t", "slow"))
    wait_until(lambda: service.arrived == 1)
    assert p.close(timeout_s=0.1) == []  # not reported as unsent: it may be stored
    assert not future.done() and not made[0]._closed.is_set()
    service.hold.set()
    assert future.result(timeout=5).offset == 0
    assert service.bodies("t") == ["slow"]
    wait_until(made[0]._closed.is_set)  # closed by the request that ended last


def test_async_close_does_not_report_a_request_on_the_wire_as_unsent():
    service = FakeService()

    async def scenario() -> None:
        arrived, answer = asyncio.Event(), asyncio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            arrived.set()
            await answer.wait()
            return service.handle(request)

        transport = AsyncTransport(
            "http://fake",
            service.credentials,
            retry=FAST,
            http_transport=httpx.MockTransport(handler),
        )
        p = AsyncProducer("http://fake", transport=transport, request_timeout_s=0.2)
        slow = await p.send_async(Message("t", "slow"))
        await arrived.wait()
        queued = await p.send_async(Message("t", "queued"))
        unsent = await p.close(timeout_s=0.05)
        assert [m.body for m in unsent] == [b"queued"]
        assert isinstance(queued.exception(), ClientClosedError)
        assert not slow.done()
        answer.set()
        assert (await asyncio.wait_for(slow, 5)).offset == 0

    asyncio.run(scenario())
    assert service.bodies("t") == ["slow"]


def test_outbox_parks_sends_while_the_service_is_down_then_delivers_once_in_order(tmp_path):
    service = FakeService()
    service.down = True
    with producer(service, outbox_path=tmp_path / "outbox.db") as p:
        first = p.send(Message("t", "0", message_group="g"))
        assert first.pending and first.queue is None
        futures = [p.send_async(Message("t", f"{i}", message_group="g")) for i in range(1, 200)]
        p.flush(timeout_s=5)  # parked counts as flushed
        assert not any(f.done() for f in futures)
        service.down = False
        receipts = [f.result(timeout=10) for f in futures]
    assert service.bodies("t") == [str(i) for i in range(200)]
    assert [r.offset for r in receipts] == list(range(1, 200))


def test_a_new_producer_resumes_the_outbox_with_the_original_ids(tmp_path):
    service = FakeService()
    service.down = True
    path = tmp_path / "outbox.db"
    p = producer(service, outbox_path=path)
    for i in range(30):
        p.send_async(Message("t", f"{i}"))
    p.flush()
    assert p.close(timeout_s=0.1) == []
    store = SqliteOutbox(path)
    assert store.stats().messages == 30
    old_stamps = {(e.batch.producer_id, e.batch.sequence) for e in store.entries()}
    store.close()

    service.down = False
    service.fail_next = [(503, "Busy")]
    with producer(service, outbox_path=path) as resumed:
        assert resumed.producer_id not in {pid for pid, _ in old_stamps}
        resumed.send(Message("t", "30"))
    assert service.bodies("t") == [str(i) for i in range(31)]
    assert old_stamps <= {(r["producer_id"], r["sequence"]) for r in service.requests}
    assert SqliteOutbox(path).stats().messages == 0


def test_a_durable_outbox_says_when_it_is_full(tmp_path):
    service = FakeService()
    service.down = True
    with producer(service, outbox_path=tmp_path / "o.db", outbox_max_messages=5) as p:
        for i in range(5):
            p.send_async(Message("t", f"{i}"))
        with pytest.raises(OutboxFullError):
            p.send_async(Message("t", "5"))


def test_the_memory_buffer_applies_backpressure_then_says_it_is_full():
    service = FakeService()
    service.down = True
    p = producer(service, outbox_max_messages=2, request_timeout_s=0.2, linger_ms=10_000)
    p.send_async(Message("t", "0"))
    p.send_async(Message("t", "1"))
    started = time.monotonic()
    with pytest.raises(OutboxFullError):
        p.send_async(Message("t", "2"))
    assert time.monotonic() - started >= 0.2
    p.close(timeout_s=0)


def test_async_producer_batches_retries_and_parks(tmp_path):
    service = FakeService()

    async def scenario() -> None:
        transport = AsyncTransport(
            "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
        )
        producer = AsyncProducer("http://fake", transport=transport, outbox_path=tmp_path / "o.db")
        producer.outbox_retry_max_s = 0.05
        async with producer:
            futures = [await producer.send_async(Message("t", f"{i}")) for i in range(300)]
            await asyncio.gather(*futures)
            service.fail_next = [(503, "Busy")]
            assert (await producer.send(Message("t", "300"))).offset == 300
            service.down = True
            assert (await producer.send(Message("t", "301"))).pending
            later = await producer.send_async(Message("t", "302"))
            await producer.flush(timeout_s=5)
            service.down = False
            assert (await asyncio.wait_for(later, 5)).offset == 302
            batch = await producer.send_batch([Message("t", "303"), Message("t", "304")])
            assert [r.offset for r in batch] == [303, 304]

    asyncio.run(scenario())
    assert service.bodies("t") == [str(i) for i in range(305)]
    assert len(service.requests) < 50


# ---------------------------------------------------------------------------- durability (B1)
def outbox_messages(path) -> int:
    """Messages in the SQLite outbox, read from the file itself (what a kill -9 leaves)."""
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT COALESCE(SUM(message_count), 0) FROM batches").fetchone()[0]
    finally:
        db.close()


def test_the_outbox_holds_every_accepted_message_while_its_topic_is_busy(tmp_path):
    service = FakeService()
    service.hold.clear()  # the first request hangs: its topic stays busy
    path = tmp_path / "o.db"
    p = producer(service, outbox_path=path)
    first = p.send_async(Message("t", "first"))
    wait_until(lambda: service.arrived == 1)
    futures = []
    for group in range(5):  # several lingers: several small batches in the outbox
        futures += [p.send_async(Message("t", f"m{group * 20 + i}")) for i in range(20)]
        time.sleep(0.02)
    wait_until(lambda: outbox_messages(path) == 101, timeout_s=2)  # durable within ~linger
    done = []
    for f in [first, *futures]:
        f.add_done_callback(done.append)
    service.hold.set()
    receipts = [f.result(timeout=5) for f in [first, *futures]]
    p.close()
    assert [r.offset for r in receipts] == list(range(101))
    assert service.bodies("t") == ["first", *(f"m{i}" for i in range(100))]
    assert len(service.requests) == 2  # the small batches went out merged, in one request
    assert len(done) == 101 and outbox_messages(path) == 0


def test_a_blocking_send_is_durable_while_its_topic_is_busy(tmp_path):
    service = FakeService()
    service.hold.clear()
    path = tmp_path / "o.db"
    p = producer(service, outbox_path=path)
    p.send_async(Message("t", "first"))
    wait_until(lambda: service.arrived == 1)
    sender = threading.Thread(target=p.send, args=(Message("t", "blocking"),), daemon=True)
    sender.start()
    wait_until(lambda: outbox_messages(path) == 2, timeout_s=2)  # stored before it returns
    service.hold.set()
    sender.join(5)
    p.close()
    assert service.bodies("t") == ["first", "blocking"]


def test_batches_that_may_have_been_sent_are_never_merged(tmp_path):
    service = FakeService()
    service.down = True
    path = tmp_path / "o.db"
    with producer(service, outbox_path=path, max_attempts=1) as p:
        assert p.send(Message("t", "a")).pending  # posted (refused): parked, maybe sent
        for body in ("b", "c"):
            p.send_async(Message("t", body))
            p.flush(timeout_s=5)  # each its own batch behind the parked one
        stored = [(e.batch.producer_id, e.batch.sequence) for e in p._state.store.entries()]
        assert len(stored) == 3
        service.down = False
        p.flush(timeout_s=5)
        wait_until(lambda: len(service.stored["t"]) == 3)
    assert service.bodies("t") == ["a", "b", "c"]
    first, merged = service.requests
    assert (first["producer_id"], first["sequence"]) == stored[0]  # resent as it was
    assert [m["message_id"] for m in first["messages"]] == [service.stored["t"][0]["message_id"]]
    assert (merged["producer_id"], merged["sequence"]) not in stored  # a new sequence
    assert len(merged["messages"]) == 2


# ---------------------------------------------------------------------------- errors (B3)
def test_an_unexpected_error_while_posting_fails_the_batch_and_frees_the_topic():
    service = FakeService()
    service.crash_next = 1
    with producer(service) as p:
        with pytest.raises(TransportError, match="unexpectedly"):
            p.send(Message("t", "crash"))
        assert p.send(Message("t", "next")).offset == 0
        p.flush(timeout_s=2)


def test_an_outbox_failure_after_a_send_is_retried_without_duplicates(tmp_path):
    service = FakeService()
    with producer(service, outbox_path=tmp_path / "o.db") as p:
        p.start()
        store = p._state.store
        real_remove, real_release = store.remove, store.release
        failures = {"remove": 1, "release": 1}

        def flaky(name, real):
            def call(entry_id):
                if failures[name]:
                    failures[name] -= 1
                    raise sqlite3.OperationalError("database is locked")
                return real(entry_id)

            return call

        store.remove = flaky("remove", real_remove)
        store.release = flaky("release", real_release)
        first = p.send_async(Message("t", "1"))
        assert first.result(timeout=5).offset == 0  # resent; the service knew it
        assert p.send(Message("t", "2")).offset == 1  # the topic is not stuck
        p.flush(timeout_s=5)
    assert service.bodies("t") == ["1", "2"]
    assert len({(r["producer_id"], r["sequence"]) for r in service.requests}) == 2


def test_async_producer_survives_an_unexpected_error_while_posting():
    service = FakeService()
    service.crash_next = 1

    async def scenario() -> None:
        transport = AsyncTransport(
            "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
        )
        async with AsyncProducer("http://fake", transport=transport) as p:
            with pytest.raises(TransportError, match="unexpectedly"):
                await p.send(Message("t", "crash"))
            assert (await p.send(Message("t", "next"))).offset == 0
            await p.flush(timeout_s=2)

    asyncio.run(scenario())
