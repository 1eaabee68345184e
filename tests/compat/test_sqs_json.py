"""The SQS API through boto3's SQS client (AWS JSON 1.0, boto3 1.40) against the local
stack over real HTTP."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as AwsCredentials

from .sqs_helpers import (  # noqa: F401 - fixtures
    REGION,
    error_code,
    moto_attribute_md5,
    new_sqs_key,
    queue_name,
    sqs,
    sqs_client,
)

ATTRIBUTES = {
    "city": {"DataType": "String", "StringValue": "Zürich"},
    "count": {"DataType": "Number", "StringValue": "12.50"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"},
    "unit": {"DataType": "String.currency", "StringValue": "CHF"},
    "raw": {"DataType": "Binary.png", "BinaryValue": b"\x89PNG"},
}


def _wire(attributes: dict) -> dict:
    """Attributes as the wire carries them (binary values as base64 text)."""
    import base64

    return {
        name: (
            {**v, "BinaryValue": base64.b64encode(v["BinaryValue"]).decode()}
            if "BinaryValue" in v
            else v
        )
        for name, v in attributes.items()
    }


# ----------------------------------------------------------------------------- queues
def test_create_send_receive_delete(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert url.endswith(f"/000000000000/{queue_name}")
    assert sqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == url
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello")
    assert sent["MD5OfMessageBody"] == hashlib.md5(b"hello").hexdigest()
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in received] == [(sent["MessageId"], "hello")]
    assert received[0]["MD5OfBody"] == sent["MD5OfMessageBody"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_create_queue_is_idempotent_and_refuses_other_attributes(sqs, queue_name) -> None:  # noqa: F811
    first = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "45"})
    again = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "45"})
    assert first["QueueUrl"] == again["QueueUrl"]
    with pytest.raises(sqs.exceptions.QueueNameExists) as caught:
        sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "60"})
    assert error_code(caught.value) == "QueueAlreadyExists"


def test_queue_attributes_and_counts(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(
        QueueName=queue_name,
        Attributes={
            "VisibilityTimeout": "40",
            "DelaySeconds": "0",
            "MessageRetentionPeriod": "7200",
            "ReceiveMessageWaitTimeSeconds": "1",
        },
    )["QueueUrl"]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert attributes["VisibilityTimeout"] == "40"
    assert attributes["MessageRetentionPeriod"] == "7200"
    assert attributes["ReceiveMessageWaitTimeSeconds"] == "1"
    assert attributes["QueueArn"] == f"arn:aws:sqs:{REGION}:000000000000:{queue_name}"
    assert attributes["ApproximateNumberOfMessages"] == "0"
    sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "90"})
    only = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
    assert only["Attributes"] == {"VisibilityTimeout": "90"}
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{n}")
    sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1)
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert counts == {
        "ApproximateNumberOfMessages": "2",
        "ApproximateNumberOfMessagesNotVisible": "1",
    }


def test_list_delete_and_purge(sqs, queue_name) -> None:  # noqa: F811
    urls = [sqs.create_queue(QueueName=f"{queue_name}-{n}")["QueueUrl"] for n in range(2)]
    listed = sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"]
    assert sorted(listed) == sorted(urls)
    sqs.send_message(QueueUrl=urls[0], MessageBody="gone")
    sqs.purge_queue(QueueUrl=urls[0])
    assert "Messages" not in sqs.receive_message(QueueUrl=urls[0])
    sqs.send_message(QueueUrl=urls[0], MessageBody="after the purge")
    bodies = [m["Body"] for m in sqs.receive_message(QueueUrl=urls[0])["Messages"]]
    assert bodies == ["after the purge"]
    sqs.delete_queue(QueueUrl=urls[1])
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName=f"{queue_name}-1")
    assert sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"] == [urls[0]]


# ---------------------------------------------------------------------------- messages
def test_message_attributes_and_their_digests(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sent = sqs.send_message(
        QueueUrl=url, MessageBody="with attributes", MessageAttributes=ATTRIBUTES
    )
    assert sent["MD5OfMessageAttributes"] == moto_attribute_md5(_wire(ATTRIBUTES))
    (message,) = sqs.receive_message(
        QueueUrl=url, MessageAttributeNames=["All"], MessageSystemAttributeNames=["All"]
    )["Messages"]
    assert message["MessageAttributes"] == ATTRIBUTES
    assert message["MD5OfMessageAttributes"] == sent["MD5OfMessageAttributes"]
    assert message["Attributes"]["ApproximateReceiveCount"] == "1"
    assert int(message["Attributes"]["SentTimestamp"]) > 0


def test_receive_selects_attributes_by_name_and_prefix(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    dotted = {
        **ATTRIBUTES,
        "geo.lat": {"DataType": "Number", "StringValue": "47.37"},
        "geo.lon": {"DataType": "Number", "StringValue": "8.54"},
    }
    sqs.send_message(QueueUrl=url, MessageBody="x", MessageAttributes=dotted)
    (message,) = sqs.receive_message(
        QueueUrl=url, MessageAttributeNames=["city", "geo.*"], AttributeNames=["SentTimestamp"]
    )["Messages"]
    assert set(message["MessageAttributes"]) == {"city", "geo.lat", "geo.lon"}
    assert set(message["Attributes"]) == {"SentTimestamp"}


def test_send_batch_answers_per_entry(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    bad = {"x": {"DataType": "Number", "StringValue": "not a number"}}
    answer = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "a", "MessageBody": "one"},
            {"Id": "b", "MessageBody": "two", "MessageAttributes": bad},
            {"Id": "c", "MessageBody": "three"},
        ],
    )
    assert [s["Id"] for s in answer["Successful"]] == ["a", "c"]
    assert [(f["Id"], f["Code"], f["SenderFault"]) for f in answer["Failed"]] == [
        ("b", "InvalidParameterValue", True)
    ]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in received) == ["one", "three"]
    deleted = sqs.delete_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(received)
        ]
        + [{"Id": "forged", "ReceiptHandle": "not-a-handle"}],
    )
    assert sorted(s["Id"] for s in deleted["Successful"]) == ["0", "1"]
    assert [(f["Id"], f["Code"]) for f in deleted["Failed"]] == [
        ("forged", "ReceiptHandleIsInvalid")
    ]


def test_visibility_follows_the_broker_clock(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="again")
    (first,) = sqs.receive_message(QueueUrl=url)["Messages"]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    cirrusmq_stack.advance_time(21)  # the visibility timeout passed: receivable at once
    (again,) = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])[
        "Messages"
    ]
    assert again["MessageId"] == first["MessageId"]
    assert again["Attributes"]["ApproximateReceiveCount"] == "2"
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=again["ReceiptHandle"], VisibilityTimeout=600
    )
    cirrusmq_stack.advance_time(30)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_the_received_handle_deletes_after_a_visibility_change(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    handle = message["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=100)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    cirrusmq_stack.advance_time(200)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    cirrusmq_stack.advance_time(40)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_change_visibility_batch(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    (message,) = sqs.receive_message(QueueUrl=url)["Messages"]
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "ok", "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 100},
            {"Id": "bad", "ReceiptHandle": "forged", "VisibilityTimeout": 100},
        ],
    )
    assert [s["Id"] for s in answer["Successful"]] == ["ok"]
    assert [(f["Id"], f["Code"]) for f in answer["Failed"]] == [("bad", "ReceiptHandleIsInvalid")]


# ----------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    ("call", "code"),
    [
        (
            lambda s, u: s.receive_message(QueueUrl=u, MaxNumberOfMessages=11),
            "InvalidParameterValue",
        ),
        (lambda s, u: s.receive_message(QueueUrl=u, WaitTimeSeconds=21), "InvalidParameterValue"),
        (
            lambda s, u: s.delete_message(QueueUrl=u, ReceiptHandle="forged"),
            "ReceiptHandleIsInvalid",
        ),
        (lambda s, u: s.send_message(QueueUrl=u, MessageBody="\x00"), "InvalidMessageContents"),
        (
            lambda s, u: s.send_message(QueueUrl=u, MessageBody="x", DelaySeconds=901),
            "InvalidParameterValue",
        ),
        (
            lambda s, u: s.send_message(
                QueueUrl=u,
                MessageBody="x",
                MessageAttributes={"AWS.x": {"DataType": "String", "StringValue": "v"}},
            ),
            "InvalidParameterValue",
        ),
        (
            lambda s, u: s.set_queue_attributes(QueueUrl=u, Attributes={"Nope": "1"}),
            "InvalidAttributeName",
        ),
        (lambda s, u: s.create_queue(QueueName="bad name"), "InvalidParameterValue"),
        (
            lambda s, u: s.send_message_batch(QueueUrl=u, Entries=[]),
            "AWS.SimpleQueueService.EmptyBatchRequest",
        ),
        (
            lambda s, u: s.send_message_batch(
                QueueUrl=u,
                Entries=[{"Id": "a", "MessageBody": "x"}, {"Id": "a", "MessageBody": "y"}],
            ),
            "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
        ),
        (
            lambda s, u: s.send_message(QueueUrl=u + "-missing", MessageBody="x"),
            "AWS.SimpleQueueService.NonExistentQueue",
        ),
    ],
)
def test_bad_input_gets_sqs_errors_and_stores_nothing(sqs, queue_name, call, code) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        call(sqs, url)
    assert error_code(caught.value) == code
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == "0"


def _signed(stack, target: str, body: dict, secret: str | None = None, key: str | None = None):
    request = AWSRequest(
        method="POST",
        url=stack.endpoint + "/",
        data=json.dumps(body).encode(),
        headers={"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0"},
    )
    credentials = AwsCredentials(
        key or stack.credentials.access_key, secret or stack.credentials.secret_key
    )
    SigV4Auth(credentials, "sqs", REGION).add_auth(request)
    return httpx.post(request.url, content=request.body, headers=dict(request.headers))


def test_unknown_action_is_invalid_action(cirrusmq_stack) -> None:
    response = _signed(cirrusmq_stack, "AmazonSQS.MakeCoffee", {})
    assert response.status_code == 400
    assert response.headers["x-amzn-query-error"] == "InvalidAction;Sender"


def test_authentication_errors(cirrusmq_stack, queue_name) -> None:  # noqa: F811
    unsigned = httpx.post(
        cirrusmq_stack.endpoint + "/",
        content=b"{}",
        headers={
            "X-Amz-Target": "AmazonSQS.ListQueues",
            "Content-Type": "application/x-amz-json-1.0",
        },
    )
    assert unsigned.status_code == 403
    assert unsigned.json()["__type"].endswith("#MissingAuthenticationToken")
    wrong = sqs_client(cirrusmq_stack, secret_key="not-the-secret")
    with pytest.raises(wrong.exceptions.ClientError) as caught:
        wrong.list_queues()
    assert error_code(caught.value) == "SignatureDoesNotMatch"
    unknown = sqs_client(cirrusmq_stack, access_key="no-such-key", secret_key="x")
    with pytest.raises(unknown.exceptions.ClientError) as caught:
        unknown.list_queues()
    assert error_code(caught.value) == "InvalidClientTokenId"


def test_permissions_follow_the_cirrusmq_grants(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    producer = sqs_client(cirrusmq_stack, *new_sqs_key(cirrusmq_stack, {"publish": [queue_name]}))
    consumer = sqs_client(
        cirrusmq_stack,
        *new_sqs_key(
            cirrusmq_stack,
            {"subscribe": [{"groups": [f"sqs-{queue_name}"], "topics": [queue_name]}]},
        ),
    )
    producer.send_message(QueueUrl=url, MessageBody="allowed")
    for denied in (
        lambda: producer.receive_message(QueueUrl=url),
        lambda: producer.create_queue(QueueName=queue_name + "-x"),
        lambda: consumer.send_message(QueueUrl=url, MessageBody="no"),
        lambda: consumer.delete_queue(QueueUrl=url),
    ):
        with pytest.raises(producer.exceptions.ClientError) as caught:
            denied()
        assert error_code(caught.value) == "AccessDenied"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    (message,) = consumer.receive_message(QueueUrl=url)["Messages"]
    consumer.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def _signed_raw(stack, path: str, body: bytes, headers: dict) -> httpx.Response:
    request = AWSRequest(method="POST", url=stack.endpoint + path, data=body, headers=headers)
    credentials = AwsCredentials(stack.credentials.access_key, stack.credentials.secret_key)
    SigV4Auth(credentials, "sqs", REGION).add_auth(request)
    return httpx.post(request.url, content=request.body, headers=dict(request.headers))


@pytest.mark.parametrize(
    ("path", "body", "headers", "status", "marker"),
    [
        ("/", b"[1, 2]", {"X-Amz-Target": "AmazonSQS.ListQueues"}, 400, "SerializationException"),
        (
            "/",
            b"{not json",
            {"X-Amz-Target": "AmazonSQS.ListQueues"},
            400,
            "SerializationException",
        ),
        ("/", b"Version=2012-11-05", {}, 400, "<Code>MissingAction</Code>"),
        ("/", b"Action=Nope", {}, 400, "<Code>InvalidAction</Code>"),
        ("/000000000000/q-none", b"Action=ReceiveMessage", {}, 400, "NonExistentQueue"),
        ("/", b"Action=SendMessage&QueueUrl=x&MessageAttribute.x.Name=a", {}, 400, "Malformed"),
        ("/v1/nothing", b"Action=ListQueues", {}, 404, "RouteNotFound"),
    ],
)
def test_malformed_requests_get_4xx(cirrusmq_stack, path, body, headers, status, marker) -> None:
    content_type = "application/x-amz-json-1.0" if headers else "application/x-www-form-urlencoded"
    response = _signed_raw(cirrusmq_stack, path, body, {**headers, "Content-Type": content_type})
    assert response.status_code == status, response.text
    assert marker in response.text
