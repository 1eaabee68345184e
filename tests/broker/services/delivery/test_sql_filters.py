"""SQL92 filters on receive (in-process moto): skipped messages are settled for the group as
tag-filtered ones are, the filter type is part of the group's subscription, FIFO queues and
the retry topic honour it."""

from __future__ import annotations

import pytest
from broker_helpers import create_fifo_topic, send, statuses
from cirrusmq_broker.errors import InvalidFilterExpression, SubscriptionConflict
from cirrusmq_broker.rules.filters import Subscription
from cirrusmq_broker.storage.groups import GroupStateStore

SQL = "a > 5 AND region IN ('eu', 'us')"


def test_sql_filter_delivers_matching_messages_and_settles_the_rest(broker):
    broker.admin.create_topic("t", queues=1)
    for a, region in [("6", "eu"), ("4", "eu"), ("7", "asia"), ("9", "us")]:
        send(broker, "t", f"{a}-{region}".encode(), properties={"a": a, "region": region})
    send(broker, "t", b"none")
    got = broker.consume.receive(
        "g", "t", filter_expression=SQL, filter_type="SQL92", max_messages=10
    )
    assert [m.message.body for m in got] == [b"6-eu", b"9-us"]
    broker.consume.ack("g", [m.receipt_handle for m in got])
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.cursor, status.lag, status.inflight) == (5, 5, 0, 0)


def test_tags_is_the_message_tag(broker):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", tag="TagA")
    send(broker, "t", b"b", tag="TagB")
    send(broker, "t", b"none")
    got = broker.consume.receive(
        "g", "t", filter_expression="TAGS = 'TagB' OR TAGS IS NULL", filter_type="SQL92",
        max_messages=10,
    )  # fmt: skip
    assert [m.message.body for m in got] == [b"b", b"none"]


def test_the_filter_type_is_part_of_the_subscription(broker):
    broker.admin.create_topic("t", queues=1)
    broker.consume.receive("g", "t", filter_expression="a > 5", filter_type="SQL92")
    assert broker.consume.receive("g", "t", filter_expression="a>5", filter_type="SQL92") == []
    with pytest.raises(SubscriptionConflict) as err:
        broker.consume.receive("g", "t", filter_expression="*")
    assert err.value.details == {"topic": "t", "subscribed": "SQL92 a > 5", "requested": "*"}
    with pytest.raises(SubscriptionConflict):
        broker.consume.receive("g", "t", filter_expression="a > 6", filter_type="SQL92")
    assert broker.consume.describe_group("g").subscriptions == {"t": Subscription("a > 5", "SQL92")}
    changed = broker.consume.subscribe("g", "t", "b = 'x'", filter_type="SQL92")
    assert changed == Subscription("b = 'x'", "SQL92")
    send(broker, "t", b"no", properties={"b": "y"})
    send(broker, "t", b"yes", properties={"b": "x"})
    got = broker.consume.receive(
        "g", "t", filter_expression="b='x'", filter_type="SQL92", max_messages=10
    )
    assert [m.message.body for m in got] == [b"yes"]


def test_a_malformed_sql_filter_stores_nothing(broker):
    broker.admin.create_topic("t", queues=1)
    with pytest.raises(InvalidFilterExpression) as err:
        broker.consume.receive("g", "t", filter_expression="a >", filter_type="SQL92")
    assert err.value.details["position"] == 3
    with pytest.raises(InvalidFilterExpression):
        broker.consume.subscribe("g", "t", "a IN (1)", filter_type="SQL92")
    assert broker.consume.describe_group("g").subscriptions == {}


def test_a_fifo_queue_honours_the_sql_filter_in_order(broker):
    create_fifo_topic(broker, "t")
    for i in range(6):
        send(broker, "t", b"%d" % i, message_group="k", properties={"even": str(i % 2 == 0)})
    seen = []
    while got := broker.consume.receive(
        "g", "t", filter_expression="even = TRUE", filter_type="SQL92", client_id="c1"
    ):
        seen += [m.message.body for m in got]
        broker.consume.ack("g", [m.receipt_handle for m in got])
    assert seen == [b"0", b"2", b"4"]


def test_a_retried_message_is_filtered_with_the_group_filter(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"keep", properties={"a": "9"})
    [first] = broker.consume.receive(
        "g", "t", filter_expression="a > 5", filter_type="SQL92", invisible_seconds=10
    )
    clock.advance(11)  # the lease ends: the message moves to the group's retry topic
    again = []
    for _ in range(5):
        again += broker.consume.receive(
            "g", "t", filter_expression="a > 5", filter_type="SQL92", max_messages=10
        )
        if again:
            break
        clock.advance(60)
    assert [m.message.body for m in again] == [b"keep"]
    assert again[0].delivery_attempt == 2


def test_a_subscribe_landing_inside_a_first_receive_keeps_its_filter(broker, monkeypatch):
    """A first receive read no subscription; a subscribe lands before the receive records
    its own filter: the subscribe, which answered, stays, and the receive is refused (its
    filter would skip messages the subscribed one delivers)."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"no", properties={"b": "y"})
    send(broker, "t", b"yes", properties={"b": "x"})
    real = GroupStateStore.subscribe
    landed: list[Subscription] = []

    def subscribe(self, group, topic, subscription, *, only_if_new):
        if only_if_new and not landed:
            landed.append(broker.consume.subscribe("g", "t", "b = 'x'", filter_type="SQL92"))
        return real(self, group, topic, subscription, only_if_new=only_if_new)

    monkeypatch.setattr(GroupStateStore, "subscribe", subscribe)
    with pytest.raises(SubscriptionConflict):
        broker.consume.receive("g", "t", filter_expression="*", max_messages=10)
    assert landed == [Subscription("b = 'x'", "SQL92")]
    assert broker.consume.describe_group("g").subscriptions == {"t": landed[0]}
    got = broker.consume.receive(
        "g", "t", filter_expression="b='x'", filter_type="SQL92", max_messages=10
    )
    assert [m.message.body for m in got] == [b"yes"]
