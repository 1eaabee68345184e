"""SQS FIFO message groups as SQS holds them: a receive hands out as many messages of one
group as it can, in order, and each group is held on its own (deleting one group's
messages, or making them visible again, frees that group while the others of the same
receive stay held), with each message its own visibility. The same topic consumed through
the CirrusMQ API keeps RocketMQ's orderly rule: a delivery is one unit that holds all of
its groups until it settles."""

from __future__ import annotations

import zlib

from cirrusmq import Message, Producer, SimpleConsumer
from cirrusmq_broker import limits

from .conftest import unique
from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


def _same_queue_groups() -> tuple[str, str]:
    """Two MessageGroupIds that hash to the same queue of a topic with the default queues."""
    queue_of = lambda group: zlib.crc32(group.encode()) % limits.DEFAULT_QUEUES  # noqa: E731
    other = next(f"b{n}" for n in range(1000) if queue_of(f"b{n}") == queue_of("a"))
    return "a", other


def _fifo_queue(sqs, queue_name: str) -> str:  # noqa: F811
    return sqs.create_queue(
        QueueName=f"{queue_name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]


def _send(sqs, url: str, *bodies: str) -> None:  # noqa: F811
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=body.split("-")[0])


def _bodies(answer: dict) -> list[str]:
    return [m["Body"] for m in answer.get("Messages", [])]


def test_a_receive_takes_one_group_before_the_next(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo_queue(sqs, queue_name)
    a, b = _same_queue_groups()
    _send(sqs, url, f"{a}-0", f"{b}-1", f"{a}-2", f"{b}-3")
    assert _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2)) == [
        f"{a}-0",
        f"{a}-2",
    ]
    rest = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert _bodies(rest) == [f"{b}-1", f"{b}-3"]


def test_each_group_of_one_receive_is_held_on_its_own(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo_queue(sqs, queue_name)
    a, b = _same_queue_groups()
    _send(sqs, url, f"{a}-0", f"{b}-1", f"{a}-2", f"{b}-3")
    both = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in both] == [f"{a}-0", f"{a}-2", f"{b}-1", f"{b}-3"]
    _send(sqs, url, f"{a}-4", f"{b}-5")
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    for message in both[:2]:  # a's messages: a is free, b stays held
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    after_delete = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in after_delete] == [f"{a}-4"]
    for message in both[2:]:  # b's messages visible again: b is free, a-4 stays held
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    assert _bodies(again) == [f"{b}-1", f"{b}-3", f"{b}-5"]


def test_a_message_made_visible_frees_its_group_up_to_the_next_in_flight(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = _fifo_queue(sqs, queue_name)
    _send(sqs, url, "a-0", "a-1", "a-2")
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in received] == ["a-0", "a-1", "a-2"]
    for message in (received[0], received[2]):
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    assert _bodies(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)) == ["a-0"]


def test_the_native_api_keeps_a_delivery_of_several_groups_whole(cirrusmq_stack, admin) -> None:
    topic = unique("fifo")
    admin.create_topic(topic, message_type="FIFO")
    a, b = _same_queue_groups()
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        for n, group in enumerate((a, b, a, b)):
            producer.send(Message(topic, f"{group}-{n}".encode(), message_group=group))
        with SimpleConsumer(
            cirrusmq_stack.endpoint, cirrusmq_stack.credentials, unique("g"), [topic],
            await_duration=0,
        ) as consumer:  # fmt: skip
            delivery = consumer.receive(max_message_num=10, invisible_duration=60)
            assert [m.body.decode() for m in delivery] == [f"{a}-0", f"{b}-1", f"{a}-2", f"{b}-3"]
            producer.send(Message(topic, f"{a}-4".encode(), message_group=a))
            consumer.ack_batch([m for m in delivery if m.message_group == a])
            assert consumer.receive(max_message_num=10) == []  # b's part holds the delivery
            consumer.ack_batch([m for m in delivery if m.message_group == b])
            assert [m.body.decode() for m in consumer.receive(max_message_num=10)] == [f"{a}-4"]
