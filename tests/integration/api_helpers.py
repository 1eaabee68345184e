"""Helpers for talking to the local stack's HTTP API in tests: every request is signed
(``cirrusmq.signing``, docs/AUTH-SPEC.md) with the broker clock, which
``LocalStack.advance_time`` moves (the service checks the date against it)."""

from __future__ import annotations

import base64
import collections
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


TTL_FLOOR_S = 5 * 365 * 24 * 3600
"""DynamoDB's TTL leaves alone an ``expires_at`` more than five years in the past."""


class StoredState:
    """Every table's items (but the nonces) and the bucket's keys at one moment, as JSON
    lines. Two states are equal when they hold the same items, but for an item of the
    earlier one that the later one lacks because its TTL passed: the local stack's expirer
    deletes such items while the suite runs, between a test's two snapshots. A new or
    changed item, or one gone before its TTL, is always a change."""

    def __init__(
        self,
        taken_s: float,
        items: dict[str, list[tuple[float | None, str]]],
        ttl_tables: frozenset[str],
    ) -> None:
        self.taken_s = taken_s
        self.items = items
        self.ttl_tables = ttl_tables

    def differences(self, other: StoredState) -> dict[str, tuple[list[str], list[str]]]:
        """Per table that changed: (lines only in the earlier state that expiry does not
        explain, lines only in the later state)."""
        earlier, later = sorted((self, other), key=lambda state: state.taken_s)
        found: dict[str, tuple[list[str], list[str]]] = {}
        for table in sorted(earlier.items.keys() | later.items.keys()):
            before = collections.Counter(earlier.items.get(table, []))
            after = collections.Counter(later.items.get(table, []))
            gone = [
                line
                for (expires, line) in (before - after).elements()
                if not (table in earlier.ttl_tables and _expired(expires, later.taken_s))
            ]
            new = [line for _, line in (after - before).elements()]
            if gone or new:
                found[table] = (sorted(gone), sorted(new))
        return found

    def changed(self, other: StoredState) -> set[str]:
        """The tables whose items differ between the two states."""
        return set(self.differences(other))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoredState) and not self.differences(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}: {len(lines)}" for t, lines in sorted(self.items.items()))
        return f"StoredState(at {self.taken_s:.0f} s; {counts})"


def _expired(expires: float | None, moment_s: float) -> bool:
    return expires is not None and moment_s - TTL_FLOOR_S < expires <= moment_s


def stored_state(stack) -> StoredState:
    """Every table's items (but the nonces) and the bucket's keys, now."""
    import json

    dynamodb, s3 = stack.boto3_client("dynamodb"), stack.boto3_client("s3")
    items: dict[str, list[tuple[float | None, str]]] = {}
    for logical_id, name in sorted(stack.resources.items()):
        if logical_id in NOT_STATE:
            continue
        if logical_id == "MessageBucket":
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name)
            items[logical_id] = [(None, o["Key"]) for p in pages for o in p.get("Contents", [])]
            continue  # its lifecycle tiers are days: the suite's clock never reaches one
        pages = dynamodb.get_paginator("scan").paginate(TableName=name, ConsistentRead=True)
        items[logical_id] = [
            (_expiry(i), json.dumps(i, sort_keys=True, default=lambda b: bytes(b).hex()))
            for p in pages
            for i in p["Items"]
        ]
    ttl_tables = frozenset(
        t for t in items if t != "MessageBucket" and _has_ttl(dynamodb, stack.resources[t])
    )
    # after the scan: an item it missed had expired by then
    return StoredState(broker_now(), items, ttl_tables)


def _has_ttl(dynamodb: Any, table: str) -> bool:
    """Whether ``table`` has TTL on ``expires_at`` (asked once per table)."""
    if table not in _TTL_ON:
        described = dynamodb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        _TTL_ON[table] = described.get("AttributeName") == "expires_at"
    return _TTL_ON[table]


_TTL_ON: dict[str, bool] = {}


def _expiry(item: dict) -> float | None:
    expires = item.get("expires_at", {}).get("N")
    return None if expires is None else float(expires)


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
