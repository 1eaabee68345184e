"""SQS's error codes and messages, in each protocol's shape: the JSON protocol through boto3
1.40, the query protocol as a query-era client posts it (a SigV4-signed form, XML answers),
against the local stack over real HTTP."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from .sqs_helpers import (  # noqa: F401 - fixtures
    error_code,
    query_error,
    query_request,
    queue_name,
    sqs,
)

UNKNOWN = "http://127.0.0.1/000000000000/no-such-queue-here"


def _error(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    error = exc.value.response["Error"]
    return error["Code"], error["Message"]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.get_queue_url(QueueName="no-such-queue-here"),
        lambda s: s.get_queue_attributes(QueueUrl=UNKNOWN, AttributeNames=["All"]),
        lambda s: s.delete_queue(QueueUrl=UNKNOWN),
        lambda s: s.send_message(QueueUrl=UNKNOWN, MessageBody="x"),
        lambda s: s.delete_message(QueueUrl=UNKNOWN, ReceiptHandle="h"),
    ],
)
def test_an_unknown_queue_is_sqs_s_message_in_json(sqs, call) -> None:  # noqa: F811
    with pytest.raises(ClientError) as caught:
        call(sqs)
    assert _error(caught) == (
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist.",
    )


def test_an_unknown_queue_is_sqs_s_wsdl_message_in_the_query_protocol(cirrusmq_stack) -> None:
    status, text = query_request(
        cirrusmq_stack, [("Action", "GetQueueUrl"), ("QueueName", "no-such-queue-here")]
    )
    assert status == 400
    assert query_error(text) == (
        "AWS.SimpleQueueService.NonExistentQueue",
        "The specified queue does not exist for this wsdl version.",
    )


def test_a_repeated_query_parameter_is_refused_and_does_nothing(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    status, text = query_request(
        cirrusmq_stack,
        [("Action", "SendMessage"), ("Action", "DeleteQueue"), ("MessageBody", "x")],
        path=f"/000000000000/{queue_name}",
    )
    assert status == 400
    code, message = query_error(text)
    assert code == "MalformedQueryString"
    assert "Action" in message
    assert sqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == url
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"


@pytest.mark.parametrize(
    ("action", "entry_type"),
    [
        ("send_message_batch", "SendMessageBatchRequestEntry"),
        ("delete_message_batch", "DeleteMessageBatchRequestEntry"),
        ("change_message_visibility_batch", "ChangeMessageVisibilityBatchRequestEntry"),
    ],
)
def test_an_empty_batch_names_its_entry_type(sqs, queue_name, action, entry_type) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        getattr(sqs, action)(QueueUrl=url, Entries=[])
    assert _error(caught) == (
        "AWS.SimpleQueueService.EmptyBatchRequest",
        f"There should be at least one {entry_type} in the request.",
    )


def test_a_repeated_batch_id_names_the_first_repeated_id(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    entries = [
        {"Id": "id_1", "MessageBody": "body_1"},
        {"Id": "id_2", "MessageBody": "body_2"},
        {"Id": "id_2", "MessageBody": "body_2"},
        {"Id": "id_1", "MessageBody": "body_1"},
    ]
    with pytest.raises(ClientError) as caught:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert _error(caught) == (
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        "Id id_2 repeated.",
    )


def test_a_batch_over_one_mebibyte_is_refused(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    entries = [
        {"Id": "a", "MessageBody": "a" * 600_000},
        {"Id": "b", "MessageBody": "b" * 448_577},
    ]
    with pytest.raises(ClientError) as caught:
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert _error(caught) == (
        "AWS.SimpleQueueService.BatchRequestTooLong",
        "Batch requests cannot be longer than 1048576 bytes. You have sent 1048577 bytes.",
    )
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "0"


def test_a_message_over_the_maximum_size_is_refused(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x" * 1_048_577)
    assert _error(caught) == (
        "InvalidParameterValue",
        "One or more parameters are invalid. Reason: Message must be shorter than 1048576 bytes.",
    )


def test_a_fifo_message_s_own_delay_is_refused_with_its_value(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    with pytest.raises(ClientError) as caught:
        sqs.send_message(
            QueueUrl=url, MessageBody="x", DelaySeconds=5, MessageGroupId="g",
            MessageDeduplicationId="d",
        )  # fmt: skip
    assert _error(caught) == (
        "InvalidParameterValue",
        "Value 5 for parameter DelaySeconds is invalid. Reason: The request include parameter "
        "that is not valid for this queue type.",
    )


def test_a_delay_out_of_range_fails_its_batch_entry_with_sqs_s_message(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "MessageBody": "body"},
            {"Id": "too_late", "MessageBody": "body", "DelaySeconds": 901},
        ],
    )
    assert [e["Id"] for e in answer["Successful"]] == ["ok"]
    assert answer["Failed"] == [
        {
            "Id": "too_late",
            "SenderFault": True,
            "Code": "InvalidParameterValue",
            "Message": "Value 901 for parameter DelaySeconds is invalid. "
            "Reason: DelaySeconds must be >= 0 and <= 900.",
        }
    ]


def test_an_unknown_attribute_name_is_sqs_s_error(sqs, queue_name) -> None:  # noqa: F811
    with pytest.raises(ClientError) as caught:
        sqs.create_queue(QueueName=queue_name, Attributes={"Colour": "blue"})
    assert error_code(caught.value) == "InvalidAttributeName"
    assert _error(caught)[1] == "Unknown Attribute Colour."
