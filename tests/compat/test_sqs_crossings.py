"""A message crosses protocols intact: sent through SQS and received through the CirrusMQ
SDK (the queue's group ``sqs-<queue>``), and sent through the SDK and received through SQS
(docs/compat.md#sqs: attributes ↔ tag, keys and properties). SQS spells a message's id
(a ULID) as a UUID: the same 128 bits."""

from __future__ import annotations

import json
import re

from cirrusmq import Message, Producer, SimpleConsumer
from ulid import ULID

from .sqs_helpers import moto_attribute_md5, queue_name, sqs  # noqa: F401 - fixtures

UUID_FORM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def uuid_spelling(ulid: str) -> str:
    """A ULID's 128 bits written as SQS writes a MessageId (8-4-4-4-12 lowercase hex)."""
    return str(ULID.from_str(ulid).to_uuid())


def test_sqs_to_sdk(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sent = sqs.send_message(
        QueueUrl=url,
        MessageBody='{"order": 1}',
        MessageAttributes={
            "cirrusmq.tag": {"DataType": "String", "StringValue": "TagA"},
            "cirrusmq.keys": {"DataType": "String", "StringValue": "order-1 customer-7"},
            "region": {"DataType": "String", "StringValue": "eu"},
            "amount": {"DataType": "Number", "StringValue": "12"},
        },
    )
    with SimpleConsumer(
        cirrusmq_stack.endpoint,
        cirrusmq_stack.credentials,
        f"sqs-{queue_name}",
        [queue_name],
        await_duration=2,
    ) as consumer:
        (message,) = consumer.receive(max_message_num=10, invisible_duration=30)
        consumer.ack(message)
    assert UUID_FORM.fullmatch(sent["MessageId"])
    assert sent["MessageId"] == uuid_spelling(message.message_id)
    assert message.body == b'{"order": 1}'
    assert message.tag == "TagA"
    assert message.keys == ("order-1", "customer-7")
    assert message.properties["region"] == "eu"
    assert message.properties["amount"] == "12"
    assert json.loads(message.properties["sqs.types"]) == {"amount": "Number"}
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_sdk_to_sqs(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        receipt = producer.send(
            Message(
                queue_name,
                b"from the sdk",
                tag="TagB",
                keys=("k1", "k2"),
                properties={"origin": "sdk"},
            )
        )
    (message,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert UUID_FORM.fullmatch(message["MessageId"])
    assert message["MessageId"] == uuid_spelling(receipt.message_id)
    assert message["Body"] == "from the sdk"
    expected = {
        "origin": {"DataType": "String", "StringValue": "sdk"},
        "cirrusmq.tag": {"DataType": "String", "StringValue": "TagB"},
        "cirrusmq.keys": {"DataType": "String", "StringValue": "k1 k2"},
    }
    assert message["MessageAttributes"] == expected
    assert message["MD5OfMessageAttributes"] == moto_attribute_md5(expected)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
