"""Describing a group shows the queues of its retry topic that hold messages it never read:
a redrive's letters, a nack's retries before their first delivery (lag from offset 0, where
the group starts reading them), as the Lag metric counts them."""

from __future__ import annotations

from broker_helpers import dead_letter_two, send
from cirrusmq_broker.rules.retries import REDRIVE_QUEUE, retry_topic


def rows(broker, group: str, topic: str | None = None) -> dict[tuple[str, int], tuple]:
    return {
        (q.topic, q.queue): (q.committed_offset, q.cursor, q.max_offset, q.inflight)
        for q in broker.consume.describe_group(group, topic).queues
    }


def test_redriven_letters_show_before_the_group_reads_its_retry_topic(broker):
    dead_letter_two(broker)
    assert broker.dead_letters.redrive("g").redriven == 2

    retry = retry_topic("g", "t")
    described = rows(broker, "g")
    assert described[(retry, REDRIVE_QUEUE)] == (0, 0, 2, 0), described
    assert described[("t", 0)] == (2, 2, 2, 0)
    # asked about one topic, the answer is that topic's queues
    assert set(rows(broker, "g", "t")) == {("t", 0)}

    again = broker.consume.receive("g", "t", max_messages=10)
    broker.consume.ack("g", [m.receipt_handle for m in again], lambda _: True)
    assert rows(broker, "g")[(retry, REDRIVE_QUEUE)] == (2, 2, 2, 0)


def test_a_group_with_nothing_in_its_retry_topic_shows_no_retry_queue(broker):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"a")
    got = broker.consume.receive("g", "t", max_messages=10)
    broker.consume.ack("g", [m.receipt_handle for m in got], lambda _: True)
    assert {topic for topic, _ in rows(broker, "g")} == {"t"}
