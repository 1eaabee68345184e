"""A message stored through the CirrusMQ API with characters SQS refuses (C0 controls XML 1.0
cannot carry) is received through SQS with U+FFFD in their place: a query-protocol answer is
always well-formed XML, and its batch-mates are delivered once and deleted as usual."""

from __future__ import annotations

import hashlib
import xml.etree.ElementTree as ET

from cirrusmq import Message, Producer

from .sqs_helpers import query_request, queue_name, sqs  # noqa: F401 - fixtures

NS = {"q": "http://queue.amazonaws.com/doc/2012-11-05/"}
CONTROLS = "a\x01b\x08c\x0bd\x1fe"
SHOWN = "a\ufffdb\ufffdc\ufffdd\ufffde"


def _send_through_cirrusmq(stack, topic: str) -> None:
    with Producer(stack.endpoint, stack.credentials) as producer:
        producer.send(Message(topic, b"first"))
        producer.send(Message(topic, CONTROLS.encode(), properties={"note": CONTROLS}))
        producer.send(Message(topic, b"last"))


def test_a_query_receive_of_control_characters_is_well_formed_xml(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    sqs.create_queue(QueueName=queue_name)
    _send_through_cirrusmq(cirrusmq_stack, queue_name)
    status, text = query_request(
        cirrusmq_stack,
        [
            ("Action", "ReceiveMessage"),
            ("MaxNumberOfMessages", "10"),
            ("VisibilityTimeout", "300"),
            ("MessageAttributeName.1", "All"),
        ],
        path=f"/000000000000/{queue_name}",
    )
    assert status == 200
    messages = ET.fromstring(text).findall(".//q:Message", NS)  # strict XML 1.0 parser
    bodies = {m.findtext("q:Body", namespaces=NS): m for m in messages}
    assert set(bodies) == {"first", SHOWN, "last"}
    odd = bodies[SHOWN]
    assert odd.findtext("q:MD5OfBody", namespaces=NS) == hashlib.md5(SHOWN.encode()).hexdigest()
    (note,) = odd.findall("q:MessageAttribute/q:Value/q:StringValue", NS)
    assert note.text == SHOWN
    entries = [
        (f"DeleteMessageBatchRequestEntry.{i}.{field}", value)
        for i, m in enumerate(messages, 1)
        for field, value in (
            ("Id", f"m{i}"),
            ("ReceiptHandle", m.findtext("q:ReceiptHandle", namespaces=NS)),
        )
    ]
    status, text = query_request(
        cirrusmq_stack,
        [("Action", "DeleteMessageBatch"), *entries],
        path=f"/000000000000/{queue_name}",
    )
    assert status == 200
    assert len(ET.fromstring(text).findall(".//q:DeleteMessageBatchResultEntry", NS)) == 3


def test_a_json_receive_shows_the_same_replacement(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    _send_through_cirrusmq(cirrusmq_stack, queue_name)
    messages = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], VisibilityTimeout=300
    )["Messages"]
    (odd,) = [m for m in messages if m["Body"] not in ("first", "last")]
    assert odd["Body"] == SHOWN
    assert odd["MessageAttributes"]["note"]["StringValue"] == SHOWN


def test_a_carriage_return_arrives_through_the_query_protocol(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="line\r\nnext\r")
    status, text = query_request(
        cirrusmq_stack, [("Action", "ReceiveMessage")], path=f"/000000000000/{queue_name}"
    )
    assert status == 200
    (message,) = ET.fromstring(text).findall(".//q:Message", NS)
    assert message.findtext("q:Body", namespaces=NS) == "line\r\nnext\r"
    assert message.findtext("q:MD5OfBody", namespaces=NS) == sent["MD5OfMessageBody"]
