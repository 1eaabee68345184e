"""SQS clients extend a message's visibility again and again with the receipt handle its
receive gave (ChangeMessageVisibility returns no new handle), then delete with it."""

from __future__ import annotations

from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


def test_visibility_is_extended_repeatedly_with_the_first_handle(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(2)]
    )
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, VisibilityTimeout=20)
    messages = received["Messages"]
    assert len(messages) == 2
    handle = messages[0]["ReceiptHandle"]
    for _ in range(3):  # a heartbeat every 15 s, each 60 s further
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=60)
        cirrusmq_stack.advance_time(15)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=messages[1]["ReceiptHandle"])
    cirrusmq_stack.advance_time(120)
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
