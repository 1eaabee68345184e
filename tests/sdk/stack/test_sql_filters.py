"""SQL92 property filters over HTTP with the SDK: simple, push and orderly (FIFO) consumers
receive only matching messages, the rest are settled for the group (no lag), the filter type
is part of the group's subscription, the CLI sets and shows it."""

from __future__ import annotations

import json
import threading

import pytest
from cirrusmq import (
    BadRequestError,
    ConsumeResult,
    FilterExpression,
    Message,
    Producer,
    PushConsumer,
    SimpleConsumer,
    SubscriptionConflictError,
)

from ..helpers import wait_until

SQL = FilterExpression.sql("a > 5 AND region IN ('eu', 'us')")
ROWS = [("6", "eu"), ("4", "eu"), ("7", "asia"), ("9", "us"), ("12.5", "us"), (None, "eu")]
MATCHING = ["6-eu", "9-us", "12.5-us"]


def send_rows(endpoint, credentials, topic, **fields):
    messages = []
    for a, region in ROWS:
        properties = {"region": region} if a is None else {"a": a, "region": region}
        messages.append(Message(topic, f"{a}-{region}", properties=properties, **fields))
    with Producer(endpoint, credentials) as producer:
        producer.send_batch(messages)


def test_simple_consumer_receives_only_matching_messages(
    endpoint, credentials, admin, topic, group
):
    send_rows(endpoint, credentials, topic)
    with SimpleConsumer(endpoint, credentials, group, {topic: SQL}, await_duration=1) as c:
        got = c.receive(32, 30)
        assert sorted(m.text for m in got) == sorted(MATCHING)
        c.ack_batch(got)
        assert c.receive(32, 30) == []
    described = admin.describe_group(group, topic)
    assert (described.lag, described.inflight) == (0, 0)  # the others are settled for the group
    [subscription] = described.subscriptions
    assert (subscription.filter_type, subscription.filter) == (
        "SQL92",
        "a > 5 AND region IN ('eu', 'us')",
    )


def test_another_filter_type_is_a_conflict_and_a_malformed_one_a_bad_request(
    endpoint, credentials, admin, topic, group
):
    with SimpleConsumer(endpoint, credentials, group, {topic: SQL}, await_duration=0) as c:
        assert c.receive(1) == []
    tags = SimpleConsumer(endpoint, credentials, group, {topic: "*"}, await_duration=0)
    with tags, pytest.raises(SubscriptionConflictError) as conflict:
        tags.receive(1)
    assert conflict.value.http_status == 409
    assert conflict.value.subscribed == "SQL92 a > 5 AND region IN ('eu', 'us')"
    assert conflict.value.requested == "*"
    bad = FilterExpression.sql("a BETWEEN 10 AND 1")
    malformed = SimpleConsumer(endpoint, credentials, "other-" + group, {topic: bad}, 0)
    with malformed, pytest.raises(BadRequestError) as refused:
        malformed.receive(1)
    assert refused.value.code == "InvalidFilterExpression"
    assert refused.value.details["position"] == 17
    assert admin.describe_group("other-" + group).subscriptions == ()


def test_push_consumer_honours_the_filter(endpoint, credentials, admin, topic, group):
    send_rows(endpoint, credentials, topic)
    seen: list[str] = []
    lock = threading.Lock()

    def listener(message):
        with lock:
            seen.append(message.text)
        return ConsumeResult.SUCCESS

    with PushConsumer(endpoint, credentials, group, {topic: SQL}, listener, client_id="p1"):
        wait_until(lambda: len(seen) >= len(MATCHING))
        wait_until(lambda: admin.describe_group(group, topic).lag == 0)
        [consumer] = admin.describe_group(group).consumers
        assert consumer.client_id == "p1"
    assert sorted(seen) == sorted(MATCHING)


def test_orderly_consumer_on_a_fifo_topic_keeps_order_of_matching_messages(
    endpoint, credentials, admin, make_topic, group
):
    topic = make_topic("fifo", queues=2, message_type="FIFO")
    with Producer(endpoint, credentials) as producer:
        producer.send_batch(
            [
                Message(topic, f"k{k}:{i}", message_group=f"k{k}", properties={"i": str(i)})
                for i in range(12)
                for k in range(3)
            ]
        )
    seen: list[str] = []
    lock = threading.Lock()

    def listener(message):
        with lock:
            seen.append(message.text)
        return ConsumeResult.SUCCESS

    odd = FilterExpression.sql("i IN ('1', '3', '5', '7', '9', '11')")
    with PushConsumer(
        endpoint, credentials, group, {topic: odd}, listener, orderly=True, client_id="o1"
    ):
        wait_until(lambda: len(seen) >= 18)
        wait_until(lambda: admin.describe_group(group, topic).lag == 0)
    for k in range(3):
        assert [t for t in seen if t.startswith(f"k{k}:")] == [f"k{k}:{i}" for i in range(1, 12, 2)]
    assert len(seen) == 18


def test_cli_sets_and_shows_an_sql92_subscription(
    endpoint, credentials, topic, group, tmp_path, monkeypatch
):
    from cirrusmq.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    runner = CliRunner()
    subscribe = ["group", "subscribe", group, "--topic", topic, "--sql", "region='eu' AND a>5"]
    result = runner.invoke(app, subscribe)
    assert result.exit_code == 0, result.output
    assert "with filter SQL92 region = 'eu' AND a > 5" in result.output
    shown = runner.invoke(app, ["group", "describe", group])
    assert shown.exit_code == 0, shown.output
    assert "SQL92" in shown.output and "region = 'eu' AND a > 5" in shown.output
    as_json = json.loads(runner.invoke(app, ["group", "describe", group, "--json"]).output)
    assert as_json["subscriptions"] == [
        {
            "group": group,
            "topic": topic,
            "filter": "region = 'eu' AND a > 5",
            "filter_type": "SQL92",
        }
    ]
    bad = runner.invoke(app, [*subscribe[:-1], "region ="])
    assert bad.exit_code != 0 and "position 8" in bad.output


def test_cli_consume_and_read_take_an_sql92_filter(
    endpoint, credentials, make_topic, group, tmp_path, monkeypatch
):
    from cirrusmq.cli import app
    from typer.testing import CliRunner

    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    topic = make_topic(queues=1)
    send_rows(endpoint, credentials, topic)
    runner = CliRunner()
    sql = ["--sql", "a > 5 AND region IN ('eu', 'us')", "--json"]
    read = runner.invoke(app, ["read", topic, *sql])
    assert read.exit_code == 0, read.output
    bodies = [json.loads(line)["body"] for line in read.stdout.splitlines() if '"body"' in line]
    assert bodies == MATCHING
    consumed = runner.invoke(app, ["consume", group, topic, "--ack", *sql])
    assert consumed.exit_code == 0, consumed.output
    bodies = [json.loads(line)["body"] for line in consumed.stdout.splitlines() if '"body"' in line]
    assert sorted(bodies) == sorted(MATCHING)
