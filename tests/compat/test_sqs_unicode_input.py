"""Text the SQS adapter cannot store as sent: a lone surrogate in an attribute value (JSON
can carry one), a FIFO MessageGroupId outside SQS's 1-128 printable ASCII characters. Both
are InvalidParameterValue (4xx), never a 5xx, and store nothing."""

from __future__ import annotations

import json

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from .sqs_helpers import REGION, queue_name, sqs  # noqa: F401 - fixtures


def _send(stack, params: dict) -> httpx.Response:
    body = json.dumps(params).encode()  # ensure_ascii: "\ud800" stays an escape
    request = AWSRequest(
        method="POST",
        url=stack.endpoint + "/",
        data=body,
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "AmazonSQS.SendMessage",
        },
    )
    keys = stack.credentials
    SigV4Auth(Credentials(keys.access_key, keys.secret_key), "sqs", REGION).add_auth(request)
    return httpx.post(request.url, content=request.body, headers=dict(request.headers))


def test_bad_text_is_refused_and_stores_nothing(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    fifo_url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    surrogate = {"a": {"DataType": "String", "StringValue": "\ud800"}}
    for params in (
        {"QueueUrl": url, "MessageBody": "x", "MessageAttributes": surrogate},
        {"QueueUrl": fifo_url, "MessageBody": "x", "MessageGroupId": "g" * 129},
        {"QueueUrl": fifo_url, "MessageBody": "y", "MessageGroupId": "gr\u00fcn"},
    ):
        response = _send(cirrusmq_stack, params)
        assert response.status_code == 400, response.text
        assert "InvalidParameterValue" in response.text
    for queue in (url, fifo_url):
        assert "Messages" not in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)
