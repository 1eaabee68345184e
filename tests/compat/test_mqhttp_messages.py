"""The unmodified Aliyun ``mq-http-sdk`` 1.0.3 publishes, consumes and acks on CirrusMQ
(local stack, real HTTP), and its messages cross to and from CirrusMQ's own SDK."""

from __future__ import annotations

import pytest
from cirrusmq import Message, Producer, SimpleConsumer
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage

from .conftest import unique
from .mqhttp_helpers import consume_all, mq_client

INSTANCE = "MQ_INST_local"


def test_publish_with_tag_keys_and_properties_then_consume_and_ack(client, make_topic) -> None:
    topic = make_topic()
    producer = client.get_producer(INSTANCE, topic)
    message = TopicMessage("héllo <b>&\t\n", "TagA")  # the client's XML turns CR into LF
    message.set_message_key("order-7")
    message.put_property("color", "red")
    published = producer.publish_message(message)
    assert published.message_id and published.message_body_md5

    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    [got] = consume_all(consumer, 1)
    assert got.message_id == published.message_id
    assert got.message_body == "héllo <b>&\t\n"
    assert got.message_body_md5 == published.message_body_md5
    assert got.message_tag == "TagA"
    assert got.get_message_key() == "order-7"
    assert got.get_property("color") == "red"
    assert got.consumed_times == 1
    assert got.next_consume_time > got.first_consume_time >= got.publish_time > 0
    consumer.ack_message([got.receipt_handle])
    with pytest.raises(MQExceptionBase) as empty:
        consumer.consume_message(16, 1)
    assert empty.value.type == "MessageNotExist"


def test_an_empty_long_poll_is_message_not_exist(client, make_topic) -> None:
    consumer = client.get_consumer(INSTANCE, make_topic(), unique("GID"))
    with pytest.raises(MQExceptionBase) as empty:
        consumer.consume_message(3, 2)
    assert empty.value.type == "MessageNotExist"


def test_a_long_poll_returns_a_message_published_while_it_waits(
    cirrusmq_stack, client, make_topic
) -> None:
    import threading

    topic, group = make_topic(), unique("GID")
    consumer = client.get_consumer(INSTANCE, topic, group)
    with pytest.raises(MQExceptionBase):  # the group starts at the topic's end
        consumer.consume_message(1, 0)
    publisher = mq_client(cirrusmq_stack)
    timer = threading.Timer(
        1.0, lambda: publisher.get_producer(INSTANCE, topic).publish_message(TopicMessage("late"))
    )
    timer.start()
    try:
        [got] = consumer.consume_message(1, 10)
    finally:
        timer.join()
        publisher.close_connection()
    assert got.message_body == "late"


def test_the_tag_filter_delivers_only_its_tags(client, make_topic) -> None:
    topic = make_topic()
    producer = client.get_producer(INSTANCE, topic)
    for tag in ("TagA", "TagB", "标签C"):
        producer.publish_message(TopicMessage(f"body {tag}", tag))
    # the client percent-encodes the expression in the query it signs: verified as sent
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"), "TagA||标签C")
    got = consume_all(consumer, 3)
    assert sorted(m.message_tag for m in got) == ["TagA", "标签C"]


def test_an_unacked_message_comes_again_with_consumed_times_2(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic()
    client.get_producer(INSTANCE, topic).publish_message(TopicMessage("again"))
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    [first] = consume_all(consumer, 1)
    cirrusmq_stack.advance_time((first.next_consume_time - first.first_consume_time) / 1000 + 1)
    assert consume_all(consumer, 1) == []  # the expired lease moves it to the retry schedule
    cirrusmq_stack.advance_time(11)  # RocketMQ's first retry level: 10 s
    [second] = consume_all(consumer, 1)
    assert second.message_id == first.message_id
    assert second.consumed_times == 2
    assert second.receipt_handle != first.receipt_handle


def test_a_message_published_by_mq_http_sdk_is_received_by_the_cirrusmq_sdk(
    cirrusmq_stack, client, make_topic
) -> None:
    topic, group = make_topic(), unique("g")
    stack = cirrusmq_stack
    with SimpleConsumer(stack.endpoint, stack.credentials, group, [topic], await_duration=1) as c:
        c.receive(1)  # the group starts at the topic's end
        message = TopicMessage("from aliyun", "TagX")
        message.set_message_key("k-1")
        message.put_property("p", "v")
        client.get_producer(INSTANCE, topic).publish_message(message)
        [got] = c.receive(16)
        c.ack(got)
    assert got.body == b"from aliyun"
    assert got.tag == "TagX"
    assert tuple(got.keys) == ("k-1",)
    assert got.properties["p"] == "v"


def test_a_message_sent_by_the_cirrusmq_sdk_is_consumed_by_mq_http_sdk(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic()
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    with pytest.raises(MQExceptionBase):  # the group starts at the topic's end
        consumer.consume_message(1, 0)
    stack = cirrusmq_stack
    with Producer(stack.endpoint, stack.credentials) as producer:
        producer.send(
            Message(topic, b"from cirrus", tag="TagY", keys=("k-2",), properties={"p": "v"})
        )
        producer.send(Message(topic, b"\x00\xffbinary"))
        producer.send(Message(topic, b"line\r\nnext"))
    got = {m.message_body: m for m in consume_all(consumer, 3)}
    assert "line\r\nnext" in got
    text = got["from cirrus"]
    assert text.message_tag == "TagY"
    assert text.get_message_key() == "k-2"
    assert text.get_property("p") == "v"
    [binary] = [m for m in got.values() if m.get_property("__CIRRUS_BODY_ENCODING") == "base64"]
    import base64

    assert base64.b64decode(binary.message_body) == b"\x00\xffbinary"
    consumer.ack_message([m.receipt_handle for m in got.values()])


def test_the_longest_documented_wait_is_served_not_refused(client, make_topic) -> None:
    consumer = client.get_consumer(INSTANCE, make_topic(), unique("GID"))
    with pytest.raises(MQExceptionBase) as empty:  # waits the broker's 20 s, within 60 s
        consumer.consume_message(16, 30)
    assert empty.value.type == "MessageNotExist"
