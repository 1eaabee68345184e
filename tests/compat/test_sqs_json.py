"""The SQS API through boto3's SQS client (AWS JSON 1.0) against the local stack."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from sqs_helpers import error_code, queue_name, sqs  # noqa: F401 - fixtures


def test_create_send_receive_delete(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    assert url.endswith(f"/000000000000/{queue_name}")
    assert sqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == url
    sent = sqs.send_message(QueueUrl=url, MessageBody="hello")
    received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert [(m["MessageId"], m["Body"]) for m in received] == [(sent["MessageId"], "hello")]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=received[0]["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_unknown_queue_is_queue_does_not_exist(sqs) -> None:  # noqa: F811
    with pytest.raises(sqs.exceptions.QueueDoesNotExist) as caught:
        sqs.get_queue_url(QueueName="no-such-queue")
    assert error_code(caught.value) == "AWS.SimpleQueueService.NonExistentQueue"
    assert isinstance(caught.value, ClientError)
