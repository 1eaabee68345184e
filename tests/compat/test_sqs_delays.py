"""SQS DelaySeconds (per message and the queue's default) on a local stack whose delay
scheduler runs: the message is not received before it is due, and is after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cirrusmq.testing import LocalStack

from .sqs_helpers import sqs_client


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(schedules=True, expire_interval=None) as running:
        yield running


def test_delayed_messages_arrive_when_due(stack) -> None:
    sqs = sqs_client(stack)
    url = sqs.create_queue(QueueName="delayed", Attributes={"DelaySeconds": "60"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="queue default")
    sqs.send_message(QueueUrl=url, MessageBody="own delay", DelaySeconds=120)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    stack.advance_time(61)
    (first,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert first["Body"] == "queue default"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    stack.advance_time(60)
    (second,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    assert second["Body"] == "own delay"


def test_a_long_poll_returns_a_message_whose_delay_ends_while_it_waits(stack) -> None:
    import threading

    sqs = sqs_client(stack)
    url = sqs.create_queue(QueueName="delayed-poll")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=30)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    timer = threading.Timer(1.0, lambda: stack.advance_time(31))  # while the poll waits
    timer.start()
    try:
        (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"]
    finally:
        timer.join()
    assert message["Body"] == "soon"
