"""Admin against the local stack: typed results, typed errors."""

from __future__ import annotations

import pytest
from cirrusmq import (
    Admin,
    BadRequestError,
    ConflictError,
    FilterExpression,
    GroupSummary,
    Message,
    NotFoundError,
    Producer,
    SimpleConsumer,
    Subscription,
    Topic,
    TransportError,
)

from .conftest import unique


def test_topic_lifecycle(admin):
    name = unique("adm")
    created = admin.create_topic(name, queues=3, message_type="FIFO", retention_hours=5)
    assert isinstance(created, Topic)
    assert (created.name, created.queues, created.message_type, created.retention_hours) == (
        name,
        3,
        "FIFO",
        5,
    )
    assert name in [t.name for t in admin.list_topics()]
    described = admin.describe_topic(name)
    assert described.topic == created
    assert [(q.queue, q.min_offset, q.max_offset) for q in described.queue_offsets] == [
        (0, 0, 0),
        (1, 0, 0),
        (2, 0, 0),
    ]
    assert described.message_count == 0
    admin.delete_topic(name)
    assert name not in [t.name for t in admin.list_topics()]
    with pytest.raises(NotFoundError) as gone:
        admin.describe_topic(name)
    assert gone.value.code == "TopicNotFound"


def test_errors_carry_code_status_and_retriable(admin, topic):
    with pytest.raises(ConflictError) as exists:
        admin.create_topic(topic)
    assert (exists.value.code, exists.value.http_status, exists.value.retriable) == (
        "TopicAlreadyExists",
        409,
        False,
    )
    with pytest.raises(BadRequestError) as bad:
        admin.create_topic("no spaces allowed")
    assert bad.value.code == "InvalidTopicName"
    with pytest.raises(BadRequestError) as range_error:
        admin.create_topic(unique("t"), queues=0)
    assert range_error.value.code == "InvalidRequest"
    with pytest.raises(NotFoundError):
        admin.delete_topic(unique("missing"))


def test_describe_group_and_get_message(endpoint, credentials, admin, topic, group):
    with Producer(endpoint, credentials) as producer:
        receipts = producer.send_batch([Message(topic, f"m{i}") for i in range(4)])
    assert admin.get_message(topic, receipts[2].message_id).text == "m2"
    with pytest.raises(NotFoundError) as missing:
        admin.get_message(topic, "nope")
    assert missing.value.code == "MessageNotFound"
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=1) as consumer:
        received = consumer.receive(3, 60)
        consumer.ack(received[0])
    description = admin.describe_group(group)
    assert description.group == group
    assert description.inflight == 2 and description.lag == 3
    (queue,) = [q for q in description.queues if q.max_offset]
    assert (queue.topic, queue.max_offset, queue.cursor) == (topic, 4, 3)
    assert admin.describe_group(group, topic=unique("other")).queues == ()


def test_describe_group_names_the_oldest_unacked_message_and_the_subscriptions(
    endpoint, credentials, admin, make_topic, group
):
    topic = make_topic(queues=1)
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(topic, f"m{i}", tag="A") for i in range(3)])
    with SimpleConsumer(
        endpoint, credentials, group, {topic: FilterExpression("A")}, await_duration=1
    ) as consumer:
        received = consumer.receive(2, 60)
        consumer.ack(received[1])
    admin.update_group(group, max_delivery_attempts=5)
    description = admin.describe_group(group)
    (queue,) = description.queues
    assert (queue.oldest_unacked_offset, queue.oldest_unacked_attempt) == (0, 1)
    assert description.subscriptions == (Subscription(group, topic, "A"),)
    assert description.max_delivery_attempts == 5


def test_list_groups_and_group_metrics(cirrusmq_stack, endpoint, credentials, admin, topic, group):
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(topic, f"m{i}") for i in range(3)])
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=1) as consumer:
        assert len(consumer.receive(1, 300)) == 1  # left in flight
    assert GroupSummary(group, (topic,)) in admin.list_groups()
    cirrusmq_stack.run_schedule("GroupMetricsFunction", "EmitGroupMetrics")
    metrics = admin.group_metrics(group, minutes=5)
    assert (metrics.group, metrics.period_seconds, metrics.end - metrics.start) == (
        group,
        60,
        300_000,
    )
    (series,) = metrics.topics
    assert series.topic == topic
    assert (series.points[-1].lag, series.points[-1].in_flight) == (3, 1)
    assert metrics.lag()[-1][1] == 3
    assert metrics.dead_letters[-1][1] == 0
    with pytest.raises(BadRequestError):
        admin.group_metrics(group, minutes=0)


def test_health_and_an_unreachable_endpoint(admin):
    assert admin.health()["status"] == "ok"
    with (
        Admin("http://127.0.0.1:9", max_attempts=2) as nowhere,
        pytest.raises(TransportError) as down,
    ):
        nowhere.list_topics()
    assert down.value.retriable and down.value.code is None
