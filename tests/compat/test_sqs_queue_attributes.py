"""Queue attributes as SQS has them: FIFO-only attributes, MaximumMessageSize, queue-level
delays, counts of delayed messages, retention changes and validation, through boto3 against
the local stack over real HTTP."""

from __future__ import annotations

import json
import uuid

import pytest
from botocore.exceptions import ClientError

from .sqs_helpers import queue_name, sqs  # noqa: F401 - fixtures


def _attributes(sqs, url: str) -> dict[str, str]:  # noqa: F811
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]


def _fifo(sqs, name: str, **attributes: str) -> str:  # noqa: F811
    return sqs.create_queue(
        QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", **attributes}
    )["QueueUrl"]


def test_a_fifo_queue_reports_its_deduplication_scope_and_throughput_limit(sqs, queue_name) -> None:  # noqa: F811
    attributes = _attributes(sqs, _fifo(sqs, queue_name))
    assert attributes["DeduplicationScope"] == "queue"
    assert attributes["FifoThroughputLimit"] == "perQueue"
    assert attributes["MaximumMessageSize"] == "1048576"
    high = _fifo(
        sqs, f"{queue_name}-h", DeduplicationScope="messageGroup",
        FifoThroughputLimit="perMessageGroupId",
    )  # fmt: skip
    attributes = _attributes(sqs, high)
    assert attributes["DeduplicationScope"] == "messageGroup"
    assert attributes["FifoThroughputLimit"] == "perMessageGroupId"


def test_a_message_group_scoped_deduplication_id_is_the_group_s(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo(sqs, queue_name, DeduplicationScope="messageGroup")
    for group in ("a", "b", "a"):
        sqs.send_message(
            QueueUrl=url, MessageBody=group, MessageGroupId=group, MessageDeduplicationId="same"
        )
    assert _attributes(sqs, url)["ApproximateNumberOfMessages"] == "2"


@pytest.mark.parametrize(
    "attributes",
    [{"DeduplicationScope": "queue"}, {"FifoThroughputLimit": "perQueue"}],
)
def test_fifo_attributes_are_refused_on_a_standard_queue(sqs, queue_name, attributes) -> None:  # noqa: F811
    """SQS's wording (LocalStack's AWS-recorded snapshot)."""
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName=queue_name, Attributes=attributes)
    error = caught.value.response["Error"]
    assert (error["Code"], error["Message"]) == (
        "InvalidAttributeName",
        f"You can specify the {next(iter(attributes))} only when FifoQueue is set to true.",
    )
    assert queue_name not in str(sqs.list_queues().get("QueueUrls", []))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("DeduplicationScope", "group"),
        ("FifoThroughputLimit", "perGroup"),
        ("VisibilityTimeout", "43201"),
        ("MaximumMessageSize", "1048577"),
        ("DelaySeconds", "x"),
    ],
)
def test_an_attribute_value_out_of_its_range_is_sqs_s_error(sqs, queue_name, name, value) -> None:  # noqa: F811
    with pytest.raises(ClientError) as caught:
        _fifo(sqs, queue_name, **{name: value})
    error = caught.value.response["Error"]
    assert (error["Code"], error["Message"]) == (
        "InvalidAttributeValue",
        f"Invalid value for the parameter {name}.",
    )


def test_a_fifo_queue_with_a_delay_takes_sends_without_their_own(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo(sqs, queue_name, DelaySeconds="10")
    sent = sqs.send_message(
        QueueUrl=url, MessageBody="b", MessageGroupId="g", MessageDeduplicationId="d"
    )
    assert sent["MessageId"]
    sqs.send_message(
        QueueUrl=url, MessageBody="c", MessageGroupId="g", MessageDeduplicationId="e",
        DelaySeconds=0,
    )  # fmt: skip


def test_delayed_messages_are_counted(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=900)
    sqs.send_message(QueueUrl=url, MessageBody="now")
    attributes = _attributes(sqs, url)
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attributes["ApproximateNumberOfMessages"] == "1"


def test_a_retention_change_is_the_topic_s_retention(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    from cirrusmq import Admin

    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "1209600"})
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        topic = admin.describe_topic(queue_name).topic
    assert topic.retention_hours == 336
    assert _attributes(sqs, url)["MessageRetentionPeriod"] == "1209600"


def test_received_system_attributes_are_sqs_s(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    trace = f"Root=1-5759e988-{uuid.uuid4().hex[:24]}"
    sqs.send_message(
        QueueUrl=url, MessageBody="x",
        MessageSystemAttributes={"AWSTraceHeader": {"DataType": "String", "StringValue": trace}},
    )  # fmt: skip
    (message,) = sqs.receive_message(
        QueueUrl=url, MessageSystemAttributeNames=["All"], VisibilityTimeout=10
    )["Messages"]
    system = message["Attributes"]
    assert system["SenderId"] == cirrusmq_stack.credentials.access_key
    assert system["AWSTraceHeader"] == trace
    assert int(system["ApproximateFirstReceiveTimestamp"]) >= int(system["SentTimestamp"])


def test_a_deeply_nested_redrive_policy_is_a_client_error(sqs, queue_name) -> None:  # noqa: F811
    """A RedrivePolicy nested past the JSON parser's depth is bad input (400), not a fault:
    nothing is created."""
    with pytest.raises(ClientError) as refused:
        sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": "[" * 100_000})
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert refused.value.response["Error"]["Code"] == "InvalidParameterValue"
    assert not any(u.endswith(f"/{queue_name}") for u in sqs.list_queues().get("QueueUrls", []))


def test_a_kept_attribute_longer_than_a_policy_may_be_is_refused(sqs, queue_name) -> None:  # noqa: F811
    """Policy, RedrivePolicy, RedriveAllowPolicy and KmsMasterKeyId hold at most 8,192 bytes
    (SQS's policy quota): a longer one, even valid JSON, is a 400 and stores nothing (the
    queue's item stays under DynamoDB's item size)."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    dlq = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    padded = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3, "x": "a" * 9000})
    for name, value in (("RedrivePolicy", padded), ("Policy", "{" + " " * 9000 + "}")):
        with pytest.raises(ClientError) as refused:
            sqs.set_queue_attributes(QueueUrl=url, Attributes={name: value})
        assert refused.value.response["Error"]["Code"] == "InvalidAttributeValue"
    shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert "RedrivePolicy" not in shown and "Policy" not in shown


def test_a_fifo_queue_s_delayed_sends_are_counted_as_delayed(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo(sqs, queue_name, DelaySeconds="900")
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="1")
    attributes = _attributes(sqs, url)
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attributes["ApproximateNumberOfMessages"] == "0"


def test_a_fifo_queue_s_delayed_send_counts_as_visible_once_due(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = _fifo(sqs, queue_name, DelaySeconds="30")
    sqs.send_message(QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="1")
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"DelaySeconds": "0"})
    sqs.send_message(QueueUrl=url, MessageBody="b", MessageGroupId="h", MessageDeduplicationId="2")
    (ready,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert ready["Body"] == "b"  # the receive passed over the delayed send: it waits on
    sqs.delete_message(QueueUrl=url, ReceiptHandle=ready["ReceiptHandle"])
    sqs.send_message(QueueUrl=url, MessageBody="c", MessageGroupId="h", MessageDeduplicationId="3")
    attributes = _attributes(sqs, url)
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "1"
    assert attributes["ApproximateNumberOfMessages"] == "1"
    cirrusmq_stack.advance_time(31)
    attributes = _attributes(sqs, url)
    assert attributes["ApproximateNumberOfMessagesDelayed"] == "0"
    assert attributes["ApproximateNumberOfMessages"] == "2"


def test_a_fifo_queue_s_in_flight_messages_count_as_not_visible(sqs, queue_name) -> None:  # noqa: F811
    """A receive hands out one message group's messages; the group's later messages wait
    (visible, not in flight) while other groups' are handed out."""
    url = _fifo(sqs, queue_name, ContentBasedDeduplication="true")
    for group, body in (("g", "a"), ("g", "b"), ("h", "c")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group)
    received = []
    for _ in range(2):
        (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=60)[
            "Messages"
        ]
        received.append(message["Body"])
        attributes = _attributes(sqs, url)
        assert attributes["ApproximateNumberOfMessagesNotVisible"] == str(len(received))
        assert attributes["ApproximateNumberOfMessages"] == str(3 - len(received))
        assert attributes["ApproximateNumberOfMessagesDelayed"] == "0"
    assert sorted(received) == ["a", "c"]
