"""An SQS queue without a RedrivePolicy redelivers a message that is never deleted (SQS keeps
it until its retention): CirrusMQ's default of 16 delivery attempts does not apply."""

from __future__ import annotations

import json

from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


def _deliveries(stack, sqs, url: str, times: int) -> int:  # noqa: F811
    """Receive the one message up to ``times`` times, letting each lease expire."""
    count = 0
    for _ in range(times):
        received = sqs.receive_message(QueueUrl=url, VisibilityTimeout=10, WaitTimeSeconds=1)
        if "Messages" not in received:
            break
        count += 1
        stack.advance_time(11)  # the visibility timeout passes: receivable again at once
    return count


def test_a_queue_without_redrive_policy_keeps_redelivering(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="keep trying")
    assert _deliveries(cirrusmq_stack, sqs, url, 18) == 18


def test_a_cleared_redrive_policy_stops_dead_lettering(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 2})
    url = sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": ""})
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == []
    sqs.send_message(QueueUrl=url, MessageBody="keep trying")
    assert _deliveries(cirrusmq_stack, sqs, url, 4) == 4
