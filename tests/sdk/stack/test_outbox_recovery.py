"""The producer's outbox against the local stack: a left-over outbox is sent by a fresh
producer's flush alone, and messages refused for good are set aside, then retried once."""

from __future__ import annotations

import json

import pytest
from cirrusmq import Message, MessageKeptError, NotFoundError, Producer
from cirrusmq.cli import app
from cirrusmq.outbox import SqliteOutbox
from typer.testing import CliRunner

from ..helpers import drain
from .conftest import unique


def test_a_fresh_producer_flush_sends_what_an_earlier_one_left(
    endpoint, credentials, admin, topic, group, proxy, tmp_path
):
    outbox = tmp_path / "outbox.db"
    proxy.down()  # the service is unreachable for the first producer
    first = Producer(proxy.url, credentials, outbox_path=outbox, max_attempts=1)
    for i in range(50):
        first.send_async(Message(topic, json.dumps({"seq": i}), message_group="g"))
    first.flush(timeout_s=30)
    assert first.close(timeout_s=1) == []
    assert admin.describe_topic(topic).message_count == 0

    second = Producer(endpoint, credentials, outbox_path=outbox)
    second.flush(timeout_s=60)  # no send, no `with`: the left-over outbox is sent
    second.close()
    assert admin.describe_topic(topic).message_count == 50  # once
    received = drain(endpoint, credentials, group, topic, expected=50)
    ordered = sorted(received, key=lambda m: (m.queue, m.offset))
    assert [json.loads(m.body)["seq"] for m in ordered] == list(range(50))
    store = SqliteOutbox(outbox)
    assert store.stats().messages == 0
    store.close()


def test_refused_messages_are_set_aside_then_delivered_once_on_retry(
    endpoint, credentials, admin, group, tmp_path
):
    topic = unique("later")  # does not exist yet
    with Producer(endpoint, credentials, outbox_path=tmp_path / "o.db") as producer:
        with pytest.raises(MessageKeptError) as refused:
            producer.send(Message(topic, "first"))
        assert refused.value.code == "TopicNotFound"
        assert isinstance(refused.value.refusal, NotFoundError)
        futures = [producer.send_async(Message(topic, f"m{i}")) for i in range(5)]
        assert all(isinstance(f.exception(timeout=30), MessageKeptError) for f in futures)
        kept = producer.refused()
        assert {r.refusal.code for r in kept} == {"TopicNotFound"}
        assert sum(len(r.message_ids) for r in kept) == 6
        admin.create_topic(topic)
        assert producer.retry_refused() == 6
        producer.flush(timeout_s=60)
        assert producer.refused() == []
    received = drain(endpoint, credentials, group, topic, expected=6)
    assert sorted(m.text for m in received) == sorted(["first", *(f"m{i}" for i in range(5))])
    assert admin.describe_topic(topic).message_count == 6


def test_the_cli_lists_and_retries_refused_messages(
    endpoint, credentials, admin, group, tmp_path, monkeypatch
):
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    topic, outbox = unique("later"), str(tmp_path / "o.db")
    producer = Producer(endpoint, credentials, outbox_path=outbox)
    with pytest.raises(MessageKeptError):
        producer.send_batch([Message(topic, f"m{i}") for i in range(3)])
    producer.close()
    runner = CliRunner()
    listing = runner.invoke(app, ["outbox", "list", "--path", outbox])
    assert listing.exit_code == 0 and "TopicNotFound" in listing.output, listing.output
    admin.create_topic(topic)
    retried = runner.invoke(app, ["outbox", "retry", "--path", outbox])
    assert retried.exit_code == 0, retried.output
    assert "retried 3 message(s); 0 still waiting, 0 refused" in retried.output
    received = drain(endpoint, credentials, group, topic, expected=3)
    assert sorted(m.text for m in received) == ["m0", "m1", "m2"]  # once
