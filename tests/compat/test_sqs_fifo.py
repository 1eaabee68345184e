"""SQS FIFO queues: ``.fifo`` names on FIFO topics, MessageGroupId order, deduplication by
id and by content, and a message group held while a message of it is in flight (other
groups of the same queue flow)."""

from __future__ import annotations

import zlib

import pytest
from cirrusmq_broker import limits

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


def _same_queue_groups() -> tuple[str, str]:
    """Two MessageGroupIds that hash to the same queue of an SQS queue's topic."""
    queue_of = lambda group: zlib.crc32(group.encode()) % limits.DEFAULT_QUEUES  # noqa: E731
    other = next(f"b{n}" for n in range(1000) if queue_of(f"b{n}") == queue_of("a"))
    return "a", other


def test_a_group_flows_while_another_of_the_same_queue_is_in_flight(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    a, b = _same_queue_groups()
    for n, group in enumerate((a, b, a, b)):
        sqs.send_message(
            QueueUrl=url, MessageBody=f"{group}-{n}", MessageGroupId=group,
            MessageDeduplicationId=str(n),
        )  # fmt: skip
    [first] = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)["Messages"]
    assert first["Body"] == f"{a}-0"
    rest = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])
    assert [m["Body"] for m in rest["Messages"]] == [f"{b}-1", f"{b}-3"]  # a's next waits
    assert {m["Attributes"]["MessageGroupId"] for m in rest["Messages"]} == {b}
    assert "Messages" not in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"])
    last = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in last] == [f"{a}-2"]
