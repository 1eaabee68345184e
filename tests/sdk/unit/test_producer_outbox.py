"""The producer's outbox across producers: resuming on flush/close alone, and refused batches
set aside, retried (unchanged) or purged — against the fake produce API."""

from __future__ import annotations

import asyncio
import logging

import pytest
from cirrusmq import AsyncProducer, Message, MessageKeptError, NotFoundError, Producer
from cirrusmq.outbox import SqliteOutbox
from cirrusmq.transport import AsyncTransport, RetryPolicy, Transport

from .fake_service import FakeService

FAST = RetryPolicy(max_attempts=2, initial_backoff_ms=1, max_backoff_ms=5)


def producer(service: FakeService, **options) -> Producer:
    transport = Transport(
        "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
    )
    p = Producer("http://fake", transport=transport, **options)
    p.outbox_retry_max_s = 0.05
    return p


def park(service: FakeService, path, bodies: list[str]) -> set[tuple[str, int]]:
    """A producer leaves ``bodies`` in the outbox at ``path`` (the service is down); their
    (producer id, sequence) stamps."""
    service.down = True
    p = producer(service, outbox_path=path)
    for body in bodies:
        p.send_async(Message("t", body, message_group="g"))
    p.flush(timeout_s=5)
    assert p.close(timeout_s=0.1) == []
    store = SqliteOutbox(path)
    stamps = {(e.batch.producer_id, e.batch.sequence) for e in store.entries()}
    assert store.stats().messages == len(bodies)
    store.close()
    service.down = False
    return stamps


@pytest.mark.parametrize("call", ["flush", "close"])
def test_a_fresh_producer_sends_a_left_over_outbox_on_flush_or_close_alone(tmp_path, call):
    service = FakeService()
    path = tmp_path / "o.db"
    bodies = [f"{i}" for i in range(40)]
    stamps = park(service, path, bodies)
    resumed = producer(service, outbox_path=path)
    if call == "flush":
        resumed.flush(timeout_s=5)  # no send, no `with`, no start()
        assert service.bodies("t") == bodies
        resumed.close()
    else:
        assert resumed.close(timeout_s=5) == []
    assert service.bodies("t") == bodies  # once, in order
    assert {(r["producer_id"], r["sequence"]) for r in service.requests} == stamps
    store = SqliteOutbox(path)
    assert store.stats().messages == 0
    store.close()


def test_flush_and_close_without_an_outbox_file_start_nothing(tmp_path):
    service = FakeService()
    p = producer(service, outbox_path=tmp_path / "never.db")
    p.flush()
    assert p.close() == []
    assert not (tmp_path / "never.db").exists() and service.requests == []


def test_a_fresh_async_producer_sends_a_left_over_outbox_on_flush(tmp_path):
    service = FakeService()
    path = tmp_path / "o.db"
    bodies = [f"{i}" for i in range(10)]
    park(service, path, bodies)

    async def scenario() -> None:
        transport = AsyncTransport(
            "http://fake", service.credentials, retry=FAST, http_transport=service.transport()
        )
        p = AsyncProducer("http://fake", transport=transport, outbox_path=path)
        await p.flush(timeout_s=5)
        assert service.bodies("t") == bodies
        await p.close()

    asyncio.run(scenario())
    assert service.bodies("t") == bodies


def test_refused_batches_are_set_aside_then_retried_unchanged(tmp_path, caplog):
    service = FakeService()
    service.missing_topics = {"t"}  # e.g. after a local stack restart
    path = tmp_path / "o.db"
    with producer(service, outbox_path=path) as p:
        with caplog.at_level(logging.WARNING, logger="cirrusmq.producer"):
            with pytest.raises(MessageKeptError, match="TopicNotFound") as kept:
                p.send(Message("t", "0"))
            assert isinstance(kept.value.refusal, NotFoundError)
            futures = [p.send_async(Message("t", f"{i}")) for i in range(1, 30)]
            for future in futures:  # the futures say the outbox keeps the message
                error = future.exception(timeout=5)
                assert isinstance(error, MessageKeptError) and error.code == "TopicNotFound"
        assert "set aside in the outbox" in caplog.text
        refused = p.refused()
        assert {r.refusal.code for r in refused} == {"TopicNotFound"}
        assert {r.refusal.http_status for r in refused} == {404}
        assert sum(len(r.message_ids) for r in refused) == 30
        stamps = [(r.batch.producer_id, r.batch.sequence) for r in refused]
        assert p.send(Message("other", "x")).offset == 0  # other topics go on
        service.missing_topics.clear()  # the topic exists again
        assert p.retry_refused() == 30
        p.flush(timeout_s=5)
        assert p.refused() == []
    assert service.bodies("t") == [f"{i}" for i in range(30)]  # once, in order
    stored = [(r["producer_id"], r["sequence"]) for r in service.requests if r["messages"]]
    assert stored[-len(stamps) :] == stamps  # resent with their original stamps


def test_refused_batches_survive_the_producer_and_are_not_resent_unasked(tmp_path):
    service = FakeService()
    service.missing_topics = {"t"}
    path = tmp_path / "o.db"
    with producer(service, outbox_path=path) as p, pytest.raises(MessageKeptError):
        p.send(Message("t", "a"))
    service.missing_topics.clear()
    requests = len(service.requests)
    with producer(service, outbox_path=path) as again:
        again.flush(timeout_s=5)
        assert len(service.requests) == requests  # set aside: not resent by itself
        (refused,) = again.refused()
        assert again.purge_refused([refused.entry_id]) == 1
        assert again.refused() == []
    assert service.bodies("t") == []


def test_without_an_outbox_a_refusal_fails_the_futures_and_keeps_nothing():
    service = FakeService()
    service.missing_topics = {"t"}
    with producer(service) as p:
        with pytest.raises(NotFoundError):
            p.send(Message("t", "a"))
        assert p.refused() == []


def test_a_refused_message_kept_in_the_outbox_is_not_a_plain_failure(tmp_path):
    """The future of a message the outbox keeps says so (MessageKeptError, not the typed
    NotFoundError), so an application that re-sends on NotFoundError does not store it
    twice once the kept batch is retried."""
    service = FakeService()
    service.missing_topics = {"t"}  # e.g. a local stack restarted, the topic is back later
    with producer(service, outbox_path=tmp_path / "o.db") as p:
        futures = [p.send_async(Message("t", f"{i}")) for i in range(5)]
        for i, future in enumerate(futures):
            error = future.exception(timeout=5)
            assert isinstance(error, MessageKeptError) and not isinstance(error, NotFoundError)
            assert (error.code, error.http_status) == ("TopicNotFound", 404)
            assert isinstance(error.refusal, NotFoundError)
            assert error.entry_id in {r.entry_id for r in p.refused()}
            try:  # what an application that re-sends on a plain failure does
                raise error
            except NotFoundError:
                p.send(Message("t", f"{i}"))
            except MessageKeptError:
                pass
        service.missing_topics.clear()
        assert p.retry_refused() == 5
        p.flush(timeout_s=5)
    assert sorted(service.bodies("t")) == [f"{i}" for i in range(5)]  # each stored once
