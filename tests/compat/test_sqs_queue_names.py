"""Queue names: a standard queue ``x_fifo`` and a FIFO queue ``x.fifo`` are two queues."""

from __future__ import annotations

from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


def test_a_standard_queue_named_like_a_fifo_topic_is_its_own_queue(sqs, queue_name) -> None:  # noqa: F811
    standard = sqs.create_queue(QueueName=f"{queue_name}_fifo")["QueueUrl"]
    fifo = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    assert standard != fifo
    assert sorted(sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"]) == sorted(
        [standard, fifo]
    )
    sqs.send_message(QueueUrl=standard, MessageBody="standard")
    sqs.send_message(
        QueueUrl=fifo, MessageBody="fifo", MessageGroupId="g", MessageDeduplicationId="d"
    )
    (one,) = sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=10)["Messages"]
    (other,) = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
    assert (one["Body"], other["Body"]) == ("standard", "fifo")
    sqs.delete_queue(QueueUrl=standard)
    assert sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"] == [fifo]
