"""SQS clients on the local stack: boto3's SQS client (the JSON protocol boto3 1.40 speaks)
signed with the stack's CirrusMQ admin key, and helpers the SQS tests share."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

REGION = "eu-west-3"  # any region: the signature is verified with the request's own scope


def sqs_client(stack, access_key: str | None = None, secret_key: str | None = None) -> Any:
    credentials = stack.credentials
    return boto3.session.Session().client(
        "sqs",
        endpoint_url=stack.endpoint,
        region_name=REGION,
        aws_access_key_id=access_key or credentials.access_key,
        aws_secret_access_key=secret_key or credentials.secret_key,
        config=Config(retries={"max_attempts": 1}),
    )


@pytest.fixture
def sqs(cirrusmq_stack) -> Iterator[Any]:
    client = sqs_client(cirrusmq_stack)
    yield client
    client.close()


@pytest.fixture
def queue_name() -> str:
    return f"q-{uuid.uuid4().hex[:12]}"


def error_code(exc: Exception) -> str:
    return exc.response["Error"]["Code"]  # type: ignore[attr-defined]


def moto_attribute_md5(attributes: dict) -> str:
    """MD5OfMessageAttributes as moto's SQS computes it (an independent implementation;
    moto's model takes BinaryValue as bytes)."""
    import base64

    from moto.sqs.models import Message

    decoded = {
        name: (
            {**value, "BinaryValue": base64.b64decode(value["BinaryValue"])}
            if "BinaryValue" in value
            else value
        )
        for name, value in attributes.items()
    }
    message = Message("id", "body")
    message.message_attributes = decoded
    return message.attribute_md5


def new_sqs_key(stack, permissions: dict) -> tuple[str, str]:
    """A new access key with ``permissions`` (created through the CirrusMQ API)."""
    from cirrusmq import Admin
    from cirrusmq.admin.models import Permissions

    with Admin(stack.endpoint, stack.credentials) as admin:
        created = admin.create_access_key(Permissions.from_wire(permissions), "sqs test")
    return created.access_key, created.secret_key
