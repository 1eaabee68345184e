"""ListDeadLetterSourceQueues lists only the source queues the caller's key may see, as
ListQueues does."""

from __future__ import annotations

import json

from .sqs_helpers import new_sqs_key, queue_name, sqs, sqs_client  # noqa: F401 - fixtures


def test_sources_the_key_may_not_see_are_not_listed(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    for source in ("payroll", "public"):
        sqs.create_queue(QueueName=f"{queue_name}-{source}", Attributes={"RedrivePolicy": policy})
    visible = [f"{queue_name}-dlq", f"{queue_name}-public"]
    watcher = sqs_client(cirrusmq_stack, *new_sqs_key(cirrusmq_stack, {"publish": visible}))
    try:
        listed = watcher.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"]
        assert [url.rsplit("/", 1)[1] for url in listed] == [f"{queue_name}-public"]
    finally:
        watcher.close()
