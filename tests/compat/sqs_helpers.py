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


def query_request(stack, fields: list[tuple[str, str]], path: str = "/") -> tuple[int, str]:
    """POST a query-protocol form (pairs in order, repeats kept) signed with SigV4 by botocore,
    as a query-era client sends it; the HTTP status and the XML answer's text."""
    import urllib.error
    import urllib.request
    from urllib.parse import urlencode

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    url = stack.endpoint.rstrip("/") + path
    body = urlencode(fields).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    request = AWSRequest(method="POST", url=url, data=body, headers=headers)
    keys = Credentials(stack.credentials.access_key, stack.credentials.secret_key)
    SigV4Auth(keys, "sqs", REGION).add_auth(request)
    prepared = urllib.request.Request(
        url, data=body, headers=dict(request.headers.items()), method="POST"
    )
    try:
        with urllib.request.urlopen(prepared, timeout=60) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def query_error(text: str) -> tuple[str, str]:
    """The ``Code`` and ``Message`` of a query-protocol ``ErrorResponse``."""
    import xml.etree.ElementTree as ET

    ns = {"q": "http://queue.amazonaws.com/doc/2012-11-05/"}
    root = ET.fromstring(text)
    return root.findtext(".//q:Code", namespaces=ns), root.findtext(".//q:Message", namespaces=ns)
