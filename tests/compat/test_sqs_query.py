"""The SQS query protocol (form in, XML out) through real clients of the query era: boto3
1.28.80 on botocore 1.31.80 and the AWS CLI 1.29.80, from .venv-sqs-query (``make
sqs-query-clients``; ``make test`` builds it), against the local stack over real HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest

from .sqs_helpers import moto_attribute_md5, queue_name, sqs  # noqa: F401 - fixtures

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("CIRRUSMQ_SQS_QUERY_VENV", ROOT / ".venv-sqs-query"))
PYTHON, AWS = VENV / "bin" / "python", VENV / "bin" / "aws"
SCRIPT = Path(__file__).with_name("sqs_query_script.py")
MOVE_SCRIPT = Path(__file__).with_name("sqs_query_move_script.py")

if not AWS.exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{AWS} is missing: make sqs-query-clients")
    pytest.skip(f"{AWS} is missing: make sqs-query-clients", allow_module_level=True)


def _environment(stack) -> dict[str, str]:
    home = os.environ.get("HOME", "/tmp")
    return {
        "PATH": f"{VENV / 'bin'}:/usr/bin:/bin",
        "HOME": home,
        "AWS_ACCESS_KEY_ID": stack.credentials.access_key,
        "AWS_SECRET_ACCESS_KEY": stack.credentials.secret_key,
        "AWS_DEFAULT_REGION": "us-west-2",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }


def test_boto3_over_the_query_protocol(cirrusmq_stack, queue_name) -> None:  # noqa: F811
    credentials = cirrusmq_stack.credentials
    done = subprocess.run(
        [str(PYTHON), str(SCRIPT), cirrusmq_stack.endpoint, credentials.access_key,
         credentials.secret_key, queue_name],
        capture_output=True, text=True, timeout=120, env=_environment(cirrusmq_stack),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["protocol"] == "query"
    assert out["url"] == out["again"] == out["get_url"]
    assert out["url"].endswith(f"/000000000000/{queue_name}")
    assert out["listed"] == [out["url"]]
    assert out["attributes"]["VisibilityTimeout"] == "45"
    assert out["attributes"]["QueueArn"].endswith(f":000000000000:{queue_name}")
    assert out["sent_md5"][0] == hashlib.md5("über <xml> & co".encode()).hexdigest()
    assert out["sent_md5"][1] == moto_attribute_md5(
        {
            "city": {"DataType": "String", "StringValue": "Zürich"},
            "count": {"DataType": "Number", "StringValue": "3"},
            "blob": {"DataType": "Binary", "BinaryValue": "AP8="},
        }
    )
    assert out["batch"] == ["a", "b"]
    by_body = {m["body"]: m for m in out["received"]}
    assert sorted(by_body) == ["one", "two", "über <xml> & co"]
    first = by_body["über <xml> & co"]
    assert first["id"] == out["sent"]
    assert first["attributes_md5"] == out["sent_md5"][1]
    assert (first["blob"], first["city"], first["count"]) == ("00ff", "Zürich", "1")
    assert out["deleted"] == ["0", "1"]
    assert out["delete_failed"] == [["forged", "ReceiptHandleIsInvalid"]]
    assert out["errors"] == {
        "missing": ["AWS.SimpleQueueService.NonExistentQueue", "Sender"],
        "too_many": ["InvalidParameterValue", "Sender"],
        "handle": ["ReceiptHandleIsInvalid", "Sender"],
        "exists": ["QueueAlreadyExists", "Sender"],
    }
    assert out["modeled_exception"] is True
    assert out["after_delete"] == []


def _arn(sqs, url: str) -> str:  # noqa: F811
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
    return attributes["Attributes"]["QueueArn"]


def test_message_move_tasks_over_the_query_protocol(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = _arn(sqs, dlq_url)
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})
    sqs.create_queue(QueueName=queue_name, Attributes={"RedrivePolicy": policy})
    other_url = sqs.create_queue(QueueName=f"{queue_name}-other")["QueueUrl"]
    other_arn = _arn(sqs, other_url)
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=dlq_url, MessageBody=body)
    credentials = cirrusmq_stack.credentials
    done = subprocess.run(
        [str(PYTHON), str(MOVE_SCRIPT), cirrusmq_stack.endpoint, credentials.access_key,
         credentials.secret_key, dlq_arn, other_arn],
        capture_output=True, text=True, timeout=120, env=_environment(cirrusmq_stack),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["protocol"] == "query"
    assert out["handle"]
    (task,) = out["listed"]
    assert task["Status"] == "COMPLETED"
    assert (task["SourceArn"], task["DestinationArn"]) == (dlq_arn, other_arn)
    assert task["MaxNumberOfMessagesPerSecond"] == 50
    assert task["ApproximateNumberOfMessagesMoved"] == 2
    assert task["ApproximateNumberOfMessagesToMove"] == 2
    assert task["StartedTimestamp"] > 0
    assert "TaskHandle" not in task  # only a running task has one
    assert out["cancel"] == "ResourceNotFoundException"


def _aws(stack, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(AWS), "--endpoint-url", stack.endpoint, "--output", "json", "sqs", *args],
        capture_output=True, text=True, timeout=120, env=_environment(stack),
    )  # fmt: skip


def test_aws_cli(cirrusmq_stack, queue_name) -> None:  # noqa: F811
    created = _aws(cirrusmq_stack, "create-queue", "--queue-name", queue_name)
    assert created.returncode == 0, created.stderr
    url = json.loads(created.stdout)["QueueUrl"]
    sent = _aws(
        cirrusmq_stack, "send-message", "--queue-url", url, "--message-body", "from the cli",
        "--message-attributes", '{"k": {"DataType": "String", "StringValue": "v"}}',
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    received = _aws(
        cirrusmq_stack, "receive-message", "--queue-url", url,
        "--message-attribute-names", "All", "--wait-time-seconds", "1",
    )  # fmt: skip
    assert received.returncode == 0, received.stderr
    (message,) = json.loads(received.stdout)["Messages"]
    assert message["Body"] == "from the cli"
    assert message["MessageId"] == json.loads(sent.stdout)["MessageId"]
    assert message["MessageAttributes"]["k"] == {"StringValue": "v", "DataType": "String"}
    deleted = _aws(
        cirrusmq_stack, "delete-message", "--queue-url", url,
        "--receipt-handle", message["ReceiptHandle"],
    )  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    missing = _aws(cirrusmq_stack, "get-queue-url", "--queue-name", queue_name + "-none")
    assert missing.returncode != 0
    assert "AWS.SimpleQueueService.NonExistentQueue" in missing.stderr
    listed = _aws(cirrusmq_stack, "list-queues", "--queue-name-prefix", queue_name)
    assert json.loads(listed.stdout)["QueueUrls"] == [url]
