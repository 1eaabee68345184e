"""PurgeQueue and delayed messages, on a local stack whose delay scheduler runs: SQS's purge
deletes the queue's delayed messages too, so none of them is received when its delay ends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cirrusmq.testing import LocalStack

from .sqs_helpers import sqs_client


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(schedules=True, expire_interval=None) as running:
        yield running


def test_a_purge_deletes_the_delayed_messages(stack) -> None:
    sqs = sqs_client(stack)
    url = sqs.create_queue(QueueName="purged-delayed")["QueueUrl"]
    for index in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"before {index}", DelaySeconds=30)
    sqs.purge_queue(QueueUrl=url)
    stack.advance_time(1)  # sent after the purge
    sqs.send_message(QueueUrl=url, MessageBody="after", DelaySeconds=30)
    stack.advance_time(31)
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=5)
    assert [m["Body"] for m in found.get("Messages", [])] == ["after"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
