"""The group metrics: lag, in flight, oldest unacked age per group and topic, dead letters per
group; and the AWS calls a run makes (one with no group; per group a fixed few plus one per
queue holding an unacked message)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker_helpers import dead_letter_two, send
from cirrusmq_broker.storage.clients import observe_calls


def calls(action: Callable[[], Any]) -> tuple[Any, list[str]]:
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(operation))
    try:
        return action(), seen
    finally:
        remove()


def test_no_group_costs_one_scan(broker):
    broker.admin.create_topic("t", queues=4)
    send(broker, "t", b"a", b"b")
    groups, seen = calls(broker.group_metrics.collect)
    assert groups == []
    assert seen == ["Scan"]


def test_lag_in_flight_and_the_oldest_unacked_age(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b", b"c")
    clock.advance(30)
    send(broker, "t", b"d", b"e")
    got = broker.consume.receive("g", "t", max_messages=2)  # a, b in flight
    clock.advance(15)
    [group] = broker.group_metrics.collect()
    [topic] = group.topics
    assert (group.group, topic.topic) == ("g", "t")
    assert topic.lag == 5
    assert topic.in_flight == 2
    assert topic.oldest_unacked_age_s == 45.0  # "a" was stored 45 s ago
    assert group.dead_letters == 0
    broker.consume.ack("g", [m.receipt_handle for m in got], lambda _: True)
    [topic] = broker.group_metrics.collect()[0].topics
    assert (topic.lag, topic.in_flight) == (3, 0)
    assert topic.oldest_unacked_age_s == 45.0  # "c" came with "a": the same batch


def test_a_caught_up_group_has_no_lag_and_no_age(broker):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"a")
    got = broker.consume.receive("g", "t", max_messages=10)
    broker.consume.ack("g", [m.receipt_handle for m in got], lambda _: True)
    [topic] = broker.group_metrics.collect()[0].topics
    assert (topic.lag, topic.in_flight, topic.oldest_unacked_age_s) == (0, 0, None)


def test_dead_letters_count_until_purged(broker):
    dead_letter_two(broker)
    [group] = broker.group_metrics.collect()
    assert group.dead_letters == 2
    assert group.topics[0].lag == 0  # dead-lettered messages are settled for the group
    broker.dead_letters.purge("g")
    assert broker.group_metrics.collect()[0].dead_letters == 0


def test_calls_per_group_do_not_grow_with_messages(broker):
    """With groups: 1 Scan of the groups index, 1 Scan of the topics; per group 1 Query (its
    items) + 1 BatchGetItem (heads, DLQ head, marks) + 1 Query per queue holding an unacked
    message; never one per message."""
    for name in ("t", "u"):
        broker.admin.create_topic(name, queues=4)
    receipts = [r for _ in range(3) for r in send(broker, "t", *[b"m%d" % i for i in range(50)])]
    queues_behind = len({r.queue for r in receipts})
    assert queues_behind > 1
    broker.consume.receive("g1", "t", max_messages=10)  # one queue leased, all behind
    assert broker.consume.receive("g2", "u", max_messages=10) == []  # caught up
    groups, seen = calls(broker.group_metrics.collect)
    assert [g.group for g in groups] == ["g1", "g2"]
    assert [t.lag for t in groups[0].topics] == [150]  # untouched queues count from 0
    assert seen.count("Scan") == 2
    assert seen.count("BatchGetItem") == 2  # one per group
    assert seen.count("Query") == 2 + queues_behind, seen  # a group, a queue behind: one
    assert len(seen) == 2 + 2 * 2 + queues_behind


def test_a_subscribed_group_that_never_received_counts_every_queue(broker):
    broker.admin.create_topic("t", queues=3)
    broker.consume.subscribe("g", "t", "*")
    send(broker, "t", *[b"m%d" % i for i in range(9)])
    [group] = broker.group_metrics.collect()
    assert [(t.topic, t.lag, t.in_flight) for t in group.topics] == [("t", 9, 0)]


def test_redriven_dead_letters_count_as_lag_before_the_group_reads_its_retry_topic(broker):
    """A redrive sends the letters to the group's retry topic (its redrive queue): they are
    the group's lag until it receives them, also when it never read that retry topic (a
    FIFO group, one with one attempt): the dead-letter count went to 0 with the redrive."""
    dead_letter_two(broker)
    assert broker.dead_letters.redrive("g").redriven == 2
    [group] = broker.group_metrics.collect()
    assert group.dead_letters == 0
    assert sum(t.lag for t in group.topics) == 2, group.topics
    again = broker.consume.receive("g", "t", max_messages=10)
    broker.consume.ack("g", [m.receipt_handle for m in again], lambda _: True)
    assert sum(t.lag for t in broker.group_metrics.collect()[0].topics) == 0
