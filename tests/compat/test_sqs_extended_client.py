"""AWS's SQS Extended Client, unmodified, both ways through the SQS adapter: its offloaded
payload reaches a CirrusMQ consumer, and a CirrusMQ large message reaches it as its own
pointer (moto serves S3)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest
from cirrusmq import Message, Producer, SimpleConsumer
from cirrusmq_broker.message_ids import as_uuid

from .sqs_helpers import queue_name, sqs  # noqa: F401 (fixtures)

SCRIPT = Path(__file__).with_name("sqs_extended_script.py")
MIB = 1024 * 1024


def run_extended_client(stack, *args: str) -> dict:
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL_S3": stack.aws_endpoint,
        "AWS_ACCESS_KEY_ID": "extended-client",
        "AWS_SECRET_ACCESS_KEY": "extended-client",
        "CIRRUSMQ_ACCESS_KEY": stack.credentials.access_key,
        "CIRRUSMQ_SECRET_KEY": stack.credentials.secret_key,
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def text_body(size: int) -> str:
    """``size`` characters of text (the Extended Client decodes payloads as UTF-8)."""
    return (os.urandom(size // 2 + 1).hex())[:size]


def test_an_extended_clients_offloaded_payload_reaches_a_cirrusmq_consumer(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sqs.create_queue(QueueName=queue_name)
    bucket = f"payloads-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client(
        "s3",
        endpoint_url=cirrusmq_stack.aws_endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    s3.create_bucket(Bucket=bucket)
    body = text_body(300 * 1024)  # above SQS's 256 KiB: the client offloads it to S3
    path = tmp_path / "body.txt"
    path.write_text(body, encoding="utf-8")
    sent = run_extended_client(
        cirrusmq_stack, "send", cirrusmq_stack.endpoint, queue_name, bucket, str(path)
    )
    # the consumer reads the payload with its own S3 access (boto3's default client)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", cirrusmq_stack.aws_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "consumer")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "consumer")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, "reader", [queue_name], await_duration=2) as c:
        (message,) = c.receive(1, 60)
        c.ack(message)
    assert as_uuid(message.message_id) == sent["message_id"]  # SQS spells the ULID as a UUID
    assert message.large_body is not None and message.large_body.bucket == bucket
    assert message.body_size == len(body)
    assert message.body == body.encode()


def test_a_cirrusmq_large_message_reaches_an_extended_client_with_its_payload(
    cirrusmq_stack,
    admin,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    sqs.create_queue(QueueName=queue_name)
    body = text_body(5 * MIB)  # above the inline limit: offloaded by the SDK
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        receipt = producer.send(Message(queue_name, body, properties={"kind": "big"}))
    received = run_extended_client(cirrusmq_stack, "receive", cirrusmq_stack.endpoint, queue_name)
    assert received["message_id"] == as_uuid(receipt.message_id)
    assert (received["size"], received["sha256"]) == (
        len(body),
        hashlib.sha256(body.encode()).hexdigest(),
    )
    assert "kind" in received["attributes"]
    assert admin.describe_group(f"sqs-{queue_name}", queue_name).inflight == 0  # deleted


def test_receipt_handles_have_no_dash_the_extended_client_splits_on(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """The Extended Client wraps a handle as ``<markers>-<handle>`` and recovers it as the
    text after the last ``-``: a handle with a ``-`` in it could not be deleted."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    for i in range(8):
        sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
    handles = [
        m["ReceiptHandle"]
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    ]
    assert len(handles) == 8 and not [h for h in handles if "-" in h]
    deleted = sqs.delete_message_batch(
        QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)]
    )
    assert len(deleted["Successful"]) == 8


def test_a_pointer_understating_its_payload_stops_the_read_at_the_stated_size(
    cirrusmq_stack, make_topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer states ``ExtendedPayloadSize`` 1 for a 20 MiB object: the consumer's
    stream read all of it (``body`` held it whole in memory) before the size check at
    the end. It stops with LargeBodyMismatch once the stated size is passed."""
    from cirrusmq.errors import LargeBodyError
    from cirrusmq.large_body import CHUNK_BYTES

    topic, bucket = make_topic("ext"), f"payloads-{uuid.uuid4().hex[:12]}"
    s3 = boto3.client(
        "s3",
        endpoint_url=cirrusmq_stack.aws_endpoint,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="big", Body=b"\0" * (20 * MIB))
    pointer = json.dumps(
        [
            "software.amazon.payloadoffloading.PayloadS3Pointer",
            {"s3BucketName": bucket, "s3Key": "big"},
        ]
    )
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with Producer(endpoint, credentials) as producer:
        producer.send(Message(topic, pointer, properties={"ExtendedPayloadSize": "1"}))
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", cirrusmq_stack.aws_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "consumer")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "consumer")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with SimpleConsumer(endpoint, credentials, "reader", [topic], await_duration=2) as c:
        (message,) = c.receive(1, 60)
        c.ack(message)
    assert message.large_body is not None and message.body_size == 1
    read = 0
    with pytest.raises(LargeBodyError) as raised, message.body_stream() as stream:
        for chunk in stream:
            read += len(chunk)
    assert raised.value.code == "LargeBodyMismatch"
    assert read <= CHUNK_BYTES
