"""The group list and a group's metrics read back from CloudWatch (moto): the series the
GroupMetricsFunction emits, per minute, per topic the caller may read, with one
GetMetricData call per request whatever the number of topics and points."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from broker_helpers import send
from cirrusmq_broker.errors import BrokerError
from cirrusmq_broker.services.group_history import MAX_TOPICS
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.telemetry import NAMESPACE, SERVICE


def put(name: str, value: float, at_ms: int, **dimensions: str) -> None:
    """One datapoint, its dimensions sorted by name like the local stack's forwarder sends
    them (moto matches a query's dimensions only in the order they were put)."""
    dimensions = dict(sorted({"service": SERVICE, **dimensions}.items()))
    boto3.client("cloudwatch").put_metric_data(
        Namespace=NAMESPACE,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Value": value,
                "Timestamp": datetime.fromtimestamp(at_ms / 1000, UTC),
            }
        ],
    )


def with_group(broker, group: str, *topics: str) -> None:
    for topic in topics:
        if topic not in {t.name for t in broker.topic_store.list()}:
            broker.admin.create_topic(topic, queues=1)
            send(broker, topic, b"a")
        broker.consume.receive(group, topic, max_messages=1)


def test_the_group_list_names_each_group_with_its_topics(broker):
    with_group(broker, "g", "t1", "t2")
    with_group(broker, "h", "t2")
    assert broker.group_history.groups() == {"g": {"t1", "t2"}, "h": {"t2"}}


def test_a_history_is_one_get_metric_data_per_minute_per_topic(broker, clock):
    with_group(broker, "g", "t1", "t2", "t3")
    minute = clock.now - clock.now % 60_000
    for i, lag in enumerate((9, 5, 2)):  # three minutes, the last one the current one
        at = minute - (2 - i) * 60_000 + 5_000
        for topic in ("t1", "t2", "t3"):
            put("Lag", lag, at, Group="g", Topic=topic)
            put("InFlight", 1, at, Group="g", Topic=topic)
        put("Lag", lag + 100, at + 1_000, Group="g", Topic="t1")  # the minute's maximum
        put("DeadLetters", i, at, Group="g")
    put("OldestUnackedAge", 42.5, minute + 5_000, Group="g", Topic="t1")
    put("Lag", 77, minute - 3 * 60_000, Group="g", Topic="t1")  # before the window
    put("Lag", 66, minute, Group="other", Topic="t1")  # another group

    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(f"{service}:{operation}"))
    try:
        history = broker.group_history.history("g", 3, lambda topic: topic != "t3")
    finally:
        remove()
    assert seen == ["dynamodb:Scan", "cloudwatch:GetMetricData"]
    assert (history.end - history.start, history.period_s) == (180_000, 60)
    assert history.start == minute - 120_000
    t1, t2 = history.topics
    assert (t1.topic, t2.topic) == ("t1", "t2")
    assert [p.lag for p in t1.points] == [109, 105, 102]
    assert [p.lag for p in t2.points] == [9, 5, 2]
    assert [p.in_flight for p in t2.points] == [1, 1, 1]
    assert [p.oldest_unacked_age_s for p in t1.points] == [None, None, 42.5]
    assert [p.timestamp for p in t2.points] == [minute - 120_000, minute - 60_000, minute]
    assert history.dead_letters == [(minute - 120_000, 0), (minute - 60_000, 1), (minute, 2)]
    assert history.truncated is False


def test_a_group_without_points_or_topics_has_an_empty_history(broker):
    history = broker.group_history.history("nobody", 60)
    assert (history.topics, history.dead_letters, history.truncated) == ([], [], False)


def test_too_many_topics_are_cut_to_one_call(broker, monkeypatch):
    names = {f"t{i:03d}" for i in range(MAX_TOPICS + 5)}
    monkeypatch.setattr(broker.group_catalog, "groups", lambda: {"g": names})
    history = broker.group_history.history("g", 60)
    assert history.truncated is True
    assert [t.topic for t in history.topics] == sorted(names)[:MAX_TOPICS]


@pytest.mark.parametrize(
    ("group", "minutes", "topic", "code"),
    [
        ("g", 0, None, "InvalidRequest"),
        ("g", 361, None, "InvalidRequest"),
        ("g" * 300, 60, None, "InvalidGroupName"),
        ("g", 60, "t" * 300, "InvalidTopicName"),
    ],
)
def test_bad_input_is_refused_before_any_call(broker, group, minutes, topic, code):
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(operation))
    try:
        with pytest.raises(BrokerError) as refused:
            broker.group_history.history(group, minutes, topic=topic)
    finally:
        remove()
    assert (refused.value.code, refused.value.http_status) == (code, 400)
    assert seen == []
