"""SQS FIFO queues: ``.fifo`` names on FIFO topics, MessageGroupId order, deduplication by
id and by content, and a group held while a message of it is in flight."""

from __future__ import annotations

import pytest

from .sqs_helpers import error_code, queue_name, sqs  # noqa: F401 - fixtures


def _counts(sqs, url: str) -> str:  # noqa: F811
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return attributes["ApproximateNumberOfMessages"]


def test_groups_keep_their_order_and_are_held_while_in_flight(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    assert url.endswith(f"/000000000000/{queue_name}.fifo")
    for n in range(4):
        sqs.send_message(
            QueueUrl=url, MessageBody=f"a{n}", MessageGroupId="a", MessageDeduplicationId=f"a{n}"
        )
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=2, AttributeNames=["All"])
    bodies = [m["Body"] for m in first["Messages"]]
    assert bodies == ["a0", "a1"]
    assert {m["Attributes"]["MessageGroupId"] for m in first["Messages"]} == {"a"}
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    for m in first["Messages"]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    rest = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in rest] == ["a2", "a3"]


def test_deduplication_by_id_and_by_content(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    one = sqs.send_message(
        QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d1"
    )
    again = sqs.send_message(
        QueueUrl=url, MessageBody="x", MessageGroupId="g", MessageDeduplicationId="d1"
    )
    assert again["MessageId"] == one["MessageId"]
    other_body = sqs.send_message(
        QueueUrl=url, MessageBody="y", MessageGroupId="g", MessageDeduplicationId="d1"
    )
    assert other_body["MessageId"] == one["MessageId"]
    by_content = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    repeat = sqs.send_message(QueueUrl=url, MessageBody="same body", MessageGroupId="g")
    assert repeat["MessageId"] == by_content["MessageId"] != one["MessageId"]
    assert _counts(sqs, url) == "2"
    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "same body", "MessageGroupId": "g"},
            {"Id": "b", "MessageBody": "new", "MessageGroupId": "g"},
        ],
    )
    assert [s["Id"] for s in batch["Successful"]] == ["a", "b"]
    assert _counts(sqs, url) == "3"
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in received] == ["x", "same body", "new"]


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda s, q: s.create_queue(QueueName=f"{q}.fifo"), "InvalidParameterValue"),
        (
            lambda s, q: s.create_queue(QueueName=q, Attributes={"FifoQueue": "true"}),
            "InvalidParameterValue",
        ),
        (
            lambda s, q: s.send_message(
                QueueUrl=s.create_queue(QueueName=f"{q}.fifo", Attributes={"FifoQueue": "true"})[
                    "QueueUrl"
                ],
                MessageBody="no group",
                MessageDeduplicationId="d",
            ),
            "MissingParameter",
        ),
        (
            lambda s, q: s.send_message(
                QueueUrl=s.create_queue(QueueName=f"{q}.fifo", Attributes={"FifoQueue": "true"})[
                    "QueueUrl"
                ],
                MessageBody="no dedup id",
                MessageGroupId="g",
            ),
            "InvalidParameterValue",
        ),
    ],
)
def test_fifo_errors(sqs, queue_name, call, code) -> None:  # noqa: F811
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        call(sqs, queue_name)
    assert error_code(caught.value) == code
