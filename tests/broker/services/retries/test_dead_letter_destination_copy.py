"""A dead letter appended to a group's dead-letter destination records the deliveries it had
(``cirrusmq.deliveries``, as RocketMQ's dead letters keep their reconsume times) next to the
destination's properties; the destination's groups count their own deliveries from 1."""

from __future__ import annotations

from broker_helpers import send
from cirrusmq_broker.rules.retries import DEAD_LETTER_DELIVERIES_PROPERTY


def test_a_dead_letter_in_its_destination_records_its_deliveries(broker, clock):
    broker.admin.create_topic("t", queues=1)
    broker.admin.create_topic("d", queues=1)
    broker.retries.set_max_delivery_attempts("g", 2)
    broker.retries.set_dead_letter_destination("g", "d", {"from": "t"})
    send(broker, "t", b"m0")
    for _ in range(2):
        assert len(broker.consume.receive("g", "t", invisible_seconds=10)) == 1
        clock.advance(11)
        broker.consume.receive("g", "t")  # the lease expired: a retry, then the destination
        clock.advance(30)
    [letter] = broker.consume.receive("reader", "d")
    assert letter.message.body == b"m0"
    assert letter.message.properties == {"from": "t", DEAD_LETTER_DELIVERIES_PROPERTY: "2"}
    assert letter.message.system.dead_letter_reason is not None
    assert letter.delivery_attempt == 1  # the destination's group counts its own
