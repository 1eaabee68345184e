"""The producers' batching, retry, ordering and outbox rules, against a fake service."""

from __future__ import annotations

import asyncio
import time

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
    transport = Transport("http://fake", retry=FAST, http_transport=service.transport())
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
    with producer(service, max_batch_messages=100) as p:
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
    service = FakeService()
    service.hold.clear()  # the service hangs
    p = producer(service)
    future = p.send_async(Message("t", "stuck"))
    unsent = p.close(timeout_s=0.2)
    service.hold.set()
    assert [m.body for m in unsent] == [b"stuck"]
    assert isinstance(future.exception(timeout=1), ClientClosedError)


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
        transport = AsyncTransport("http://fake", retry=FAST, http_transport=service.transport())
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
