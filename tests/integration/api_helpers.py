"""Helpers for talking to the local stack's HTTP API in tests: every request is signed
(``cirrusmq.signing``, docs/AUTH-SPEC.md) with the broker clock, which
``LocalStack.advance_time`` moves (the service checks the date against it)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Generator
from typing import Any

import httpx
from cirrusmq.credentials import Credentials
from cirrusmq.signing import (
    AUTHORIZATION_HEADER,
    DATE_HEADER,
    NONCE_HEADER,
    authorization_header,
    format_date,
    new_nonce,
    sign,
    signature,
    string_to_sign,
)
from cirrusmq_broker import clock


def broker_now() -> float:
    """Seconds since the epoch on the broker clock (what the service checks dates against)."""
    return clock.now_ms() / 1000


class StackAuth(httpx.Auth):
    """Signs every httpx request with ``credentials`` at the broker clock's time."""

    requires_request_body = True

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        request.headers.update(
            sign(request.method, request.url, request.content, self.credentials, now=broker_now())
        )
        yield request


class RequestsAuth:
    """The same for ``requests`` (schemathesis' transport): signs the prepared request over
    the path and body exactly as they go on the wire."""

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def __call__(self, request: Any) -> Any:
        body = request.body or b""
        if isinstance(body, str):  # http.client sends text as latin-1 when it can
            try:
                body = body.encode("iso-8859-1")
            except UnicodeEncodeError:
                body = body.encode()
        body = bytes(body)
        path, _, query = request.path_url.partition("?")
        date, nonce = format_date(broker_now()), new_nonce()
        text = string_to_sign(request.method, path, query, date, nonce, body)
        request.headers[DATE_HEADER] = date
        request.headers[NONCE_HEADER] = nonce
        request.headers[AUTHORIZATION_HEADER] = authorization_header(
            self.credentials.access_key, signature(self.credentials.secret_key, text)
        )
        return request


def signed_client(stack, credentials: Credentials | None = None, **options) -> httpx.Client:
    """An httpx client on the stack's API signing as ``credentials`` (default: the admin)."""
    auth = StackAuth(credentials or stack.credentials)
    return httpx.Client(base_url=stack.endpoint, auth=auth, timeout=60, **options)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def make_topic(api: httpx.Client, name: str, **fields) -> dict:
    response = api.post("/v1/topics", json={"name": name, **fields})
    assert response.status_code == 201, response.text
    return response.json()


def send(api: httpx.Client, topic: str, *messages: dict, **request) -> dict:
    response = api.post(
        f"/v1/topics/{topic}/messages", json={"messages": list(messages), **request}
    )
    assert response.status_code == 200, response.text
    return response.json()


def receive(api: httpx.Client, group: str, topic: str, **fields) -> list[dict]:
    response = api.post(f"/v1/groups/{group}/receive", json={"topic": topic, **fields})
    assert response.status_code == 200, response.text
    return response.json()["messages"]


def ack(api: httpx.Client, group: str, messages: list[dict]) -> httpx.Response:
    return api.post(
        f"/v1/groups/{group}/ack", json={"receipt_handles": [m["receipt_handle"] for m in messages]}
    )


def object_keys(stack, topic: str) -> list[str]:
    s3 = stack.boto3_client("s3")
    listed = s3.list_objects_v2(
        Bucket=stack.resources["MessageBucket"], Prefix=f"topics/topic={topic}/"
    )
    return [o["Key"] for o in listed.get("Contents", [])]


def max_offsets(api: httpx.Client, topic: str) -> list[int]:
    return [q["max_offset"] for q in api.get(f"/v1/topics/{topic}").json()["queue_offsets"]]


NOT_STATE = frozenset({"NoncesTable", "AccessKeySecretsKey"})
"""Not stored state: one nonce item per signed request; the KMS key (not a table)."""


EXPIRY_MARGIN_S = 300
"""Items whose TTL falls within this many seconds are left out of :func:`stored_state`: the
local stack's expirer deletes them while the suite runs, between a test's two snapshots."""


def _lasting(item: dict) -> bool:
    expires = item.get("expires_at", {}).get("N")
    return expires is None or float(expires) > broker_now() + EXPIRY_MARGIN_S


def stored_state(stack) -> dict[str, list[str]]:
    """Every table's items (but the nonces and items about to expire) and the bucket's keys,
    as sorted JSON lines."""
    import json

    dynamodb, s3 = stack.boto3_client("dynamodb"), stack.boto3_client("s3")
    state: dict[str, list[str]] = {}
    for logical_id, name in sorted(stack.resources.items()):
        if logical_id in NOT_STATE:
            continue
        if logical_id == "MessageBucket":
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name)
            state[logical_id] = sorted(o["Key"] for p in pages for o in p.get("Contents", []))
            continue
        pages = dynamodb.get_paginator("scan").paginate(TableName=name, ConsistentRead=True)
        state[logical_id] = sorted(
            json.dumps(i, sort_keys=True, default=lambda b: bytes(b).hex())
            for p in pages
            for i in p["Items"]
            if _lasting(i)
        )
    return state


def new_key(admin: httpx.Client, permissions: dict) -> Credentials:
    """A new active access key with ``permissions``, created through ``admin``."""
    created = admin.post("/v1/keys", json={"permissions": permissions, "description": "test"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["status"] == "ACTIVE" and "secret_key" in body
    return Credentials(body["access_key"], body["secret_key"])


def narrow_keys(stack) -> dict:
    """A FIFO and a plain ``rv-*`` topic (the FIFO one holding an admin's message) and two
    narrow keys: a consumer of ``rv-*`` groups and topics, and a producer of ``rv-*``."""
    fifo = f"rv-fifo-{uuid.uuid4().hex[:6]}"
    plain = f"rv-plain-{uuid.uuid4().hex[:6]}"
    with signed_client(stack) as admin:
        make_topic(admin, fifo, queues=1, message_type="FIFO")
        make_topic(admin, plain, queues=1)
        send(admin, fifo, {"body": b64(b"admin's ordered message"), "message_group": "g"})
        consumer = new_key(admin, {"subscribe": [{"groups": ["rv-*"], "topics": ["rv-*"]}]})
        producer = new_key(admin, {"publish": ["rv-*"]})
    return {
        "stack": stack,
        "fifo": fifo,
        "plain": plain,
        "consumer": consumer,
        "producer": producer,
    }
