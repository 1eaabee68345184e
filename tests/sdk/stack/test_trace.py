"""Message trace through the local stack: SDK (Admin.trace_message), CLI, permissions."""

from __future__ import annotations

import json

import pytest
from cirrusmq import Admin, Message, Permissions, Producer, SimpleConsumer
from cirrusmq.cli import app
from cirrusmq.errors import AccessDeniedError, NotFoundError
from typer.testing import CliRunner

from .conftest import unique


def nack_then_ack(cirrusmq_stack, endpoint, credentials, topic: str, group: str) -> str:  # noqa: ANN001
    """Send one message, receive it, nack it, receive it again after its backoff, ack it."""
    with Producer(endpoint, credentials) as producer:
        message_id = producer.send(Message(topic, b"traced")).message_id
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=2) as consumer:
        (first,) = consumer.receive(10, 30)
        assert consumer.nack(first).acked
        cirrusmq_stack.advance_time(11)  # the first backoff level (10 s) passes
        (second,) = consumer.receive(10, 30)
        assert second.message_id == message_id and second.delivery_attempt == 2
        assert consumer.ack(second).acked
    return message_id


def test_a_message_is_traced_through_a_nack_and_a_redelivery_to_its_ack(
    cirrusmq_stack,
    endpoint,
    credentials,
    admin: Admin,
    make_topic,
    group,  # noqa: ANN001
) -> None:
    topic = make_topic("traced", queues=2, trace=True)
    assert admin.describe_topic(topic).topic.trace is True
    assert next(t for t in admin.list_topics() if t.name == topic).trace is True
    message_id = nack_then_ack(cirrusmq_stack, endpoint, credentials, topic, group)
    events = admin.trace_message(topic, message_id)
    assert [(e.kind, e.attempt) for e in events] == [
        ("sent", None),
        ("delivered", 1),
        ("nacked", 1),
        ("moved_to_retry", 1),
        ("delivered", 2),
        ("acked", 2),
    ]
    sent, delivered = events[0], events[1]
    assert sent.queue is not None and sent.offset is not None
    assert delivered.group == group and delivered.invisible_until > delivered.time
    assert events[3].target_topic.startswith("retry.")
    assert [e.time for e in events] == sorted(e.time for e in events)


def test_trace_is_opt_in_and_can_be_turned_on_later(
    endpoint,
    credentials,
    admin: Admin,
    make_topic,  # noqa: ANN001
) -> None:
    topic = make_topic("plain")
    assert admin.describe_topic(topic).topic.trace is False
    with Producer(endpoint, credentials) as producer:
        untraced = producer.send(Message(topic, b"a")).message_id
        with pytest.raises(NotFoundError):
            admin.trace_message(topic, untraced)
        assert admin.update_topic(topic, trace=True).trace is True
        traced = producer.send(Message(topic, b"b")).message_id
    assert [e.kind for e in admin.trace_message(topic, traced)] == ["sent"]


def test_reading_a_trace_needs_the_permission_to_look_the_message_up(
    endpoint,
    credentials,
    admin: Admin,
    make_topic,  # noqa: ANN001
) -> None:
    topic = make_topic("secret", trace=True)
    with Producer(endpoint, credentials) as producer:
        message_id = producer.send(Message(topic, b"x")).message_id
    key = admin.create_access_key(Permissions(publish=(topic,)), "trace test")
    try:
        with Admin(endpoint, key.credentials) as narrow, pytest.raises(AccessDeniedError):
            narrow.trace_message(topic, message_id)
    finally:
        admin.delete_access_key(key.access_key)


def test_cli_prints_a_trace_as_a_timeline(
    cirrusmq_stack,
    endpoint,
    credentials,
    group,
    tmp_path,
    monkeypatch,  # noqa: ANN001
) -> None:
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    runner = CliRunner()

    def cli(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    topic = unique("clitrace")
    assert "traced" in cli("topic", "create", topic, "--queues", "1", "--trace")
    assert "trace on" in cli("topic", "describe", topic)
    listed = json.loads(cli("topic", "list", "--json"))
    assert next(t for t in listed if t["name"] == topic)["trace"] is True
    assert "trace" in cli("topic", "list").splitlines()[1]  # the column, as a topic has it on
    message_id = nack_then_ack(cirrusmq_stack, endpoint, credentials, topic, group)
    timeline = cli("message", "trace", topic, message_id)
    rows = [line.split("│") for line in timeline.splitlines() if line.startswith("│")]
    shown = [row[2].strip() for row in rows if len(row) > 3 and row[2].strip()]
    assert "6 event(s)" in timeline
    assert shown == ["sent", "delivered", "nacked", "moved_to_retry", "delivered", "acked"]
    kinds = [e["kind"] for e in json.loads(cli("message", "trace", topic, message_id, "--json"))]
    assert kinds == ["sent", "delivered", "nacked", "moved_to_retry", "delivered", "acked"]
    assert "trace off" in cli("topic", "update", topic, "--no-trace")


def test_an_ack_riding_on_a_receive_is_traced_as_acked(
    endpoint,
    credentials,
    admin: Admin,
    make_topic,
    group,  # noqa: ANN001
) -> None:
    topic = make_topic("traced-ride", queues=1, trace=True)
    with Producer(endpoint, credentials) as producer:
        message_id = producer.send(Message(topic, b"traced")).message_id
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=0) as consumer:
        (first,) = consumer.receive(10, 30)
        results, _ = consumer.receive_and_ack([first], 10, 30)
        assert [r.acked for r in results] == [True]
    assert [e.kind for e in admin.trace_message(topic, message_id)] == [
        "sent",
        "delivered",
        "acked",
    ]
