"""SQS FIFO deduplication lasts SQS's 5-minute interval: the same deduplication id (or the
same body, with content-based deduplication) sent again later is a new message."""

from __future__ import annotations

from cirrusmq_broker import clock

from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


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


def test_a_resend_across_an_interval_boundary_within_five_minutes_is_deduplicated(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    interval_ms = 5 * 60 * 1000
    # 200 s into a 5-minute interval, so that 150 s later is in the next one
    cirrusmq_stack.advance_time(((200_000 - clock.now_ms() % interval_ms) % interval_ms) / 1000)
    first = sqs.send_message(QueueUrl=url, MessageBody="once", MessageGroupId="g")
    cirrusmq_stack.advance_time(150)  # the next interval, 150 s after the first send
    again = sqs.send_message(QueueUrl=url, MessageBody="once", MessageGroupId="g")
    assert again["MessageId"] == first["MessageId"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert [m["Body"] for m in received["Messages"]] == ["once"]
    for message in received["Messages"]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    cirrusmq_stack.advance_time(200)  # 350 s after the first send: a new message
    later = sqs.send_message(QueueUrl=url, MessageBody="once", MessageGroupId="g")
    assert later["MessageId"] != first["MessageId"]
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
    assert [m["Body"] for m in received] == ["once"]


def test_a_purge_forgets_the_deduplication_ids_sent_before_it(sqs, queue_name) -> None:  # noqa: F811
    """SQS's PurgeQueue clears a FIFO queue's deduplication: an id sent again right after
    it is a new message (nothing of the queue is left to answer it with)."""
    url = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    sent = dict(QueueUrl=url, MessageGroupId="g", MessageDeduplicationId="d1")
    first = sqs.send_message(MessageBody="before", **sent)
    sqs.purge_queue(QueueUrl=url)
    again = sqs.send_message(MessageBody="after", **sent)
    assert again["MessageId"] != first["MessageId"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert [m["Body"] for m in received.get("Messages", [])] == ["after"]
