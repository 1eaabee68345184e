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
    (first,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)["Messages"]
    assert first["Body"] == "queue default"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    stack.advance_time(60)
    (second,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)["Messages"]
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
        (message,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=20)["Messages"]
    finally:
        timer.join()
    assert message["Body"] == "soon"


def _bodies(sqs, url: str) -> list[str]:
    """What one receive hands out now (deleted)."""
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    for message in found:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return sorted(m["Body"] for m in found)


def test_a_queue_delay_change_applies_to_the_sends_after_it(stack) -> None:
    sqs = sqs_client(stack)
    url = sqs.create_queue(QueueName="delay-change", Attributes={"DelaySeconds": "30"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    sqs.send_message(QueueUrl=url, MessageBody="b")
    assert _bodies(sqs, url) == ["b"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="c")
    assert _bodies(sqs, url) == []
    stack.advance_time(31)
    assert _bodies(sqs, url) == ["a"]
    stack.advance_time(30)
    assert _bodies(sqs, url) == ["c"]


def test_a_fifo_queue_s_delay_holds_each_send(stack) -> None:
    """SQS applies a FIFO queue's DelaySeconds to every send (only a per-message delay is
    refused on FIFO), also after a SetQueueAttributes change."""
    sqs = sqs_client(stack)
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true", "DelaySeconds": "30"}
    url = sqs.create_queue(QueueName="delayed.fifo", Attributes=attributes)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g")
    assert _bodies(sqs, url) == []
    stack.advance_time(31)
    assert _bodies(sqs, url) == ["a"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "60"})
    sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="g")
    stack.advance_time(31)
    assert _bodies(sqs, url) == []
    stack.advance_time(30)
    assert _bodies(sqs, url) == ["b"]
