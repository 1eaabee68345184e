"""Message trace covers the messages the compatible APIs touch (SQS, RocketMQ HTTP) as it
covers the native API's: the adapters' requests are requests of message trace too."""

from __future__ import annotations

from cirrusmq import Admin
from mq_http_sdk.mq_producer import TopicMessage

from .conftest import unique
from .mqhttp_helpers import consume_all, mq_client
from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures

INSTANCE = "MQ_INST_local"


def test_a_message_sent_received_and_deleted_through_sqs_is_traced(
    sqs,  # noqa: ANN001, F811
    queue_name: str,  # noqa: F811
    admin: Admin,
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    admin.update_topic(queue_name, trace=True)
    message_id = sqs.send_message(QueueUrl=url, MessageBody="traced")["MessageId"]
    (received,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert received["MessageId"] == message_id
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received["ReceiptHandle"])
    events = admin.trace_message(queue_name, message_id)
    assert [e.kind for e in events] == ["sent", "delivered", "acked"]
    assert events[1].group == f"sqs-{queue_name}"


def test_a_message_published_consumed_and_acked_through_mq_http_is_traced(
    cirrusmq_stack,  # noqa: ANN001
    make_topic,  # noqa: ANN001
    admin: Admin,
) -> None:
    topic = make_topic("traced", trace=True)
    group = unique("GID")
    client = mq_client(cirrusmq_stack)
    try:
        message_id = (
            client.get_producer(INSTANCE, topic)
            .publish_message(TopicMessage("traced", ""))
            .message_id
        )
        consumer = client.get_consumer(INSTANCE, topic, group)
        [got] = consume_all(consumer, 1)
        consumer.ack_message([got.receipt_handle])
    finally:
        client.close_connection()
    events = admin.trace_message(topic, message_id)
    assert [e.kind for e in events] == ["sent", "delivered", "acked"]
    assert events[1].group == group
