"""SQS dead-letter queues: RedrivePolicy maxReceiveCount moves a message to the queue its
deadLetterTargetArn names (receivable there with the same MessageId and body),
ListDeadLetterSourceQueues, and StartMessageMoveTask back to the source."""

from __future__ import annotations

import json

import pytest

from .sqs_helpers import error_code, queue_name, sqs  # noqa: F401 - fixtures


def _receive_until_dead(stack, sqs, url: str, times: int) -> str:  # noqa: F811
    """Receive the one message ``times`` times without deleting it; its MessageId."""
    message_id = None
    for _ in range(times):
        (message,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=10)["Messages"]
        message_id = message["MessageId"]
        stack.advance_time(11)  # the visibility timeout passes: receivable again at once
    assert message_id is not None
    return message_id


def test_redrive_policy_moves_to_the_named_queue_and_back(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2})
    url = sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    assert sqs.list_dead_letter_source_queues(QueueUrl=dlq_url)["queueUrls"] == [url]
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")
    assert _receive_until_dead(cirrusmq_stack, sqs, url, 2) == sent["MessageId"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    (dead,) = sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=2)["Messages"]
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "poison")
    sqs.delete_message(QueueUrl=dlq_url, ReceiptHandle=dead["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=dlq_url)

    again = sqs.send_message(QueueUrl=url, MessageBody="poison again")
    assert _receive_until_dead(cirrusmq_stack, sqs, url, 2) == again["MessageId"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    sqs.start_message_move_task(SourceArn=dlq_arn)
    assert "Messages" not in sqs.receive_message(QueueUrl=dlq_url)
    (back,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert (back["MessageId"], back["Body"]) == (again["MessageId"], "poison again")


def test_redrive_policy_needs_an_existing_queue(sqs, queue_name) -> None:  # noqa: F811
    policy = json.dumps(
        {"deadLetterTargetArn": "arn:aws:sqs:us-east-1:000000000000:nope", "maxReceiveCount": 2}
    )
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": policy})
    assert error_code(caught.value) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=queue_name)


def test_a_fifo_queue_dead_letters_into_its_fifo_dead_letter_queue(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    dlq_url = sqs.create_queue(
        QueueName=f"{queue_name}-dlq.fifo", Attributes={"FifoQueue": "true"}
    )["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true", "RedrivePolicy": policy}
    )["QueueUrl"]
    for n in range(2):
        sqs.send_message(
            QueueUrl=url, MessageBody=f"m{n}", MessageGroupId="g", MessageDeduplicationId=f"d{n}"
        )
    (first,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=10)["Messages"]
    assert first["Body"] == "m0"
    cirrusmq_stack.advance_time(11)
    (second,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=10)["Messages"]
    assert second["Body"] == "m1"  # m0 is a dead letter: its group goes on
    (dead,) = sqs.receive_message(
        QueueUrl=dlq_url, AttributeNames=["MessageGroupId"], WaitTimeSeconds=1
    )["Messages"]
    assert (dead["Body"], dead["MessageId"]) == ("m0", first["MessageId"])
    assert dead["Attributes"]["MessageGroupId"] == "g"


def test_a_queue_whose_policy_predates_dead_letter_destinations_gets_one(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.settings import Settings

    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    # as stored by a release whose RedrivePolicy set no dead-letter destination
    Broker(Settings.from_env()).retries.set_dead_letter_destination(f"sqs-{queue_name}", None)
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")
    assert _receive_until_dead(cirrusmq_stack, sqs, url, 1) == sent["MessageId"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # this receive dead-letters it
    (dead,) = sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=1)["Messages"]
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "poison")


def test_a_queue_that_is_its_own_dead_letter_queue_keeps_its_messages(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """SQS takes a queue as its own dead-letter queue: a message past maxReceiveCount is
    moved into the queue it is in, so it stays, its receives counted on."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"RedrivePolicy": policy})
    stored = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["RedrivePolicy"])
    assert json.loads(stored["Attributes"]["RedrivePolicy"])["deadLetterTargetArn"] == arn
    sent = sqs.send_message(QueueUrl=url, MessageBody="stays")
    assert _receive_until_dead(cirrusmq_stack, sqs, url, 3) == sent["MessageId"]
    (message,) = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert (message["Body"], message["Attributes"]["ApproximateReceiveCount"]) == ("stays", "4")
    assert "DeadLetterQueueSourceArn" not in message["Attributes"]


def test_a_cirrusmq_redrive_of_an_sqs_queue_s_dead_letters_counts_them_visible(
    cirrusmq_stack,
    admin,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """A queue whose dead-letter queue was deleted dead-letters into its group's own
    dead-letter topic; a CirrusMQ redrive sends them back to the group's retry topic
    (its redrive queue, never received from yet): ApproximateNumberOfMessages counts them."""
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    sqs.delete_queue(QueueUrl=dlq_url)
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")
    assert _receive_until_dead(cirrusmq_stack, sqs, url, 1) == sent["MessageId"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    group = f"sqs-{queue_name}"
    assert admin.redrive_dead_letters(group).redriven == 1
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"
    (back,) = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"]
    assert (back["MessageId"], back["Body"]) == (sent["MessageId"], "poison")
