"""Per-handle ack results and subscriptions against the local stack.

``test_a_receive_with_another_filter_conflicts_until_subscribed`` needs the service's
subscription records (``SubscriptionConflict``, ``PUT /v1/groups/{group}/subscriptions/{t}``).
"""

from __future__ import annotations

import pytest
from cirrusmq import (
    AckStatus,
    Message,
    Producer,
    SimpleConsumer,
    Subscription,
    SubscriptionConflictError,
)


def test_a_batch_ack_gives_one_result_per_message(endpoint, credentials, admin, topic, group):
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(topic, f"m{i}") for i in range(3)])
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=2) as c:
        received = c.receive(3, 60)
        assert len(received) == 3
        c.ack(received[0])
        results = c.ack_batch([*received, "forged-handle"])
    assert [r.status for r in results] == [AckStatus.ACKED] * 3 + [AckStatus.INVALID]
    assert [r.message_id for r in results[:3]] == [m.message_id for m in received]
    assert results[3].code == "InvalidReceiptHandle"
    assert admin.describe_group(group, topic).inflight == 0


def test_a_receive_with_another_filter_conflicts_until_subscribed(
    endpoint, credentials, admin, topic, group
):
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(topic, "a", tag="A"), Message(topic, "b", tag="B")])
    with SimpleConsumer(endpoint, credentials, group, {topic: "A"}, await_duration=1) as c:
        assert [m.text for m in c.receive(10)] == ["a"]
    with SimpleConsumer(endpoint, credentials, group, {topic: "B"}, await_duration=0) as c:
        with pytest.raises(SubscriptionConflictError) as conflict:
            c.receive(10)
        assert (conflict.value.topic, conflict.value.subscribed) == (topic, "A")
        assert conflict.value.requested == "B"
        assert admin.subscribe(group, topic, "A || B") == Subscription(group, topic, "A || B")
    with SimpleConsumer(endpoint, credentials, group, {topic: "A || B"}, await_duration=1) as c:
        c.receive(10)  # accepted now
