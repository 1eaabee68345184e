"""SQS FIFO deduplication lasts SQS's 5-minute interval: the same deduplication id (or the
same body, with content-based deduplication) sent again later is a new message."""

from __future__ import annotations

import pytest

from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


@pytest.mark.xfail(
    strict=True,
    reason="FIFO dedup ids are idempotent-produce stamps kept for the broker's 7-day "
    "idempotency window, not SQS's 5 minutes: a later resend is dropped as a duplicate",
)
def test_a_body_sent_again_after_the_interval_is_delivered(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="refresh", MessageGroupId="g")
    (first,) = sqs.receive_message(QueueUrl=url)["Messages"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    cirrusmq_stack.advance_time(6 * 60)  # past SQS's 5-minute deduplication interval
    sqs.send_message(QueueUrl=url, MessageBody="refresh", MessageGroupId="g")
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in received] == ["refresh"]
