"""mq-http-sdk's sharded (ordered) and timed messages on CirrusMQ's FIFO topics and delays."""

from __future__ import annotations

import pytest
from cirrusmq_broker import clock
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage

from .conftest import unique
from .mqhttp_helpers import consume_all

INSTANCE = "MQ_INST_local"


def _sharded(body: str, key: str) -> TopicMessage:
    message = TopicMessage(body, "Ordered")
    message.set_sharding_key(key)
    return message


def test_orderly_consume_keeps_each_sharding_key_in_order_and_holds_it_until_acked(
    client, make_topic
) -> None:
    topic = make_topic(queues=2, message_type="FIFO")
    producer = client.get_producer(INSTANCE, topic)
    for i in range(3):
        producer.publish_message(_sharded(f"a{i}", "order-a"))
        producer.publish_message(_sharded(f"b{i}", "order-b"))
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))

    seen: dict[str, list[str]] = {"order-a": [], "order-b": []}
    while sum(map(len, seen.values())) < 6:
        batch = consumer.consume_message_orderly(16, 1)
        assert batch
        for message in batch:
            seen[message.get_sharding_key()].append(message.message_body)
        with pytest.raises(MQExceptionBase) as held:  # nothing more of these keys until acked
            consumer.consume_message_orderly(16, 0)
        assert held.value.type == "MessageNotExist"
        consumer.ack_message([m.receipt_handle for m in batch])
    assert seen == {"order-a": ["a0", "a1", "a2"], "order-b": ["b0", "b1", "b2"]}


def test_a_start_deliver_time_holds_the_message_until_then(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic()
    due = clock.now_ms() + 60_000
    message = TopicMessage("later", "Timed")
    message.set_start_deliver_time(due)
    client.get_producer(INSTANCE, topic).publish_message(message)
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    assert consume_all(consumer, 1, wait_seconds=0) == []
    cirrusmq_stack.advance_time(61)
    cirrusmq_stack.run_schedule("SchedulerFunction", "MoveDueTimers")  # schedules are off here
    [got] = consume_all(consumer, 1)
    assert got.message_body == "later"
    assert got.get_start_deliver_time() == due
    consumer.ack_message([got.receipt_handle])
