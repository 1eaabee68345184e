"""Replays of captured signed requests, route kind by route kind (docs/AUTH-SPEC.md).

A request whose replay could change something again (an unstamped send, a receive, admin
and other writes) records its nonce before it acts: its replay is 401 ``ReplayedRequest``
and changes nothing. Reads, stamped sends and acks settled by their fast path record no
nonce (one DynamoDB write less per request): their replay is answered and changes nothing
either, which each test here proves by comparing every table and the bucket before and
after the replay.
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from api_helpers import b64, broker_now, make_topic, receive, send, signed_client, stored_state
from cirrusmq.signing import NONCE_HEADER, sign


@pytest.fixture
def topic(cirrusmq_stack) -> str:
    name = f"replay-{uuid.uuid4().hex[:8]}"
    with signed_client(cirrusmq_stack) as admin:
        make_topic(admin, name, queues=1)
    return name


def captured(stack, method: str, path: str, body: dict | None = None) -> httpx.Request:
    """One signed request, as an eavesdropper would have it (sent once, then replayed)."""
    content = b"" if body is None else json.dumps(body).encode()
    url = httpx.URL(stack.endpoint + path)
    headers = {"content-type": "application/json"} if body is not None else {}
    headers.update(sign(method, url, content, stack.credentials, now=broker_now()))
    return httpx.Request(method, url, content=content, headers=headers)


def send_twice(request: httpx.Request) -> tuple[httpx.Response, httpx.Response]:
    with httpx.Client(timeout=60) as client:
        return client.send(request), client.send(request)


def nonce_recorded(stack, request: httpx.Request) -> bool:
    """Whether the broker recorded this request's nonce (other requests' nonces come and go:
    the local stack expires them by TTL while the suite runs)."""
    key = f"{stack.credentials.access_key}#{request.headers[NONCE_HEADER]}"
    found = stack.boto3_client("dynamodb").get_item(
        TableName=stack.resources["NoncesTable"],
        Key={"nonce_key": {"S": key}},
        ConsistentRead=True,
    )
    return "Item" in found


def test_a_replayed_unstamped_send_is_refused_and_stores_nothing(cirrusmq_stack, topic):
    request = captured(
        cirrusmq_stack, "POST", f"/v1/topics/{topic}/messages", {"messages": [{"body": b64(b"x")}]}
    )
    with httpx.Client(timeout=60) as client:
        assert client.send(request).status_code == 200
        before = stored_state(cirrusmq_stack)
        replay = client.send(request)
    assert (replay.status_code, replay.json()["code"]) == (401, "ReplayedRequest")
    assert stored_state(cirrusmq_stack) == before


def test_a_replayed_stamped_send_is_the_same_answer_and_stores_nothing(cirrusmq_stack, topic):
    body = {
        "producer_id": f"p-{uuid.uuid4().hex[:8]}",
        "sequence": 1,
        "messages": [{"body": b64(b"x")}, {"body": b64(b"y")}],
    }
    request = captured(cirrusmq_stack, "POST", f"/v1/topics/{topic}/messages", body)
    with httpx.Client(timeout=60) as client:
        first = client.send(request)
        assert first.status_code == 200, first.text
        before = stored_state(cirrusmq_stack)
        replay = client.send(request)
    assert replay.status_code == 200, replay.text
    assert replay.json()["duplicate"] is True
    assert replay.json()["receipts"] == first.json()["receipts"]
    assert stored_state(cirrusmq_stack) == before
    assert not nonce_recorded(cirrusmq_stack, request)  # no write for a stamped send's nonce
    with signed_client(cirrusmq_stack) as client:
        got = receive(client, "replay-g", topic, max_messages=10)
    assert sorted(m["body"] for m in got) == [b64(b"x"), b64(b"y")]  # stored once


def test_a_replayed_ack_answers_acked_changes_nothing_and_is_refused_after_once(
    cirrusmq_stack, topic
):
    with signed_client(cirrusmq_stack) as client:
        send(client, topic, {"body": b64(b"a")}, {"body": b64(b"b")})
        handles = [m["receipt_handle"] for m in receive(client, "g-ack", topic, max_messages=2)]
    request = captured(cirrusmq_stack, "POST", "/v1/groups/g-ack/ack", {"receipt_handles": handles})
    with httpx.Client(timeout=60) as client:
        first = client.send(request)
        assert not nonce_recorded(cirrusmq_stack, request)  # the whole lease in one delete
        before = stored_state(cirrusmq_stack)
        replay = client.send(request)  # the lease is gone: sorting out claims the nonce
        assert nonce_recorded(cirrusmq_stack, request)
        again = client.send(request)
    assert first.json()["acked"] == replay.json()["acked"] == 2, (first.text, replay.text)
    assert (again.status_code, again.json()["code"]) == (401, "ReplayedRequest")
    assert stored_state(cirrusmq_stack) == before


def test_a_replayed_read_is_answered_and_records_no_nonce(cirrusmq_stack, topic):
    request = captured(cirrusmq_stack, "GET", f"/v1/topics/{topic}")
    first, replay = send_twice(request)
    assert first.status_code == replay.status_code == 200
    assert first.json() == replay.json()
    assert not nonce_recorded(cirrusmq_stack, request)


def test_a_replayed_receive_is_refused_and_leases_nothing(cirrusmq_stack, topic):
    with signed_client(cirrusmq_stack) as client:
        send(client, topic, *[{"body": b64(bytes([65 + i]))} for i in range(4)])
    request = captured(
        cirrusmq_stack,
        "POST",
        "/v1/groups/g-recv/receive",
        {"topic": topic, "max_messages": 2, "invisible_seconds": 3600},
    )
    with httpx.Client(timeout=60) as client:
        first = client.send(request)
        assert first.status_code == 200 and len(first.json()["messages"]) == 2
        assert nonce_recorded(cirrusmq_stack, request)
        before = stored_state(cirrusmq_stack)
        replay = client.send(request)
    assert (replay.status_code, replay.json()["code"]) == (401, "ReplayedRequest")
    assert stored_state(cirrusmq_stack) == before  # the other two are still there for others
    with signed_client(cirrusmq_stack) as client:
        rest = receive(client, "g-recv", topic, max_messages=10)
    assert [m["body"] for m in rest] == [b64(b"C"), b64(b"D")]


def test_a_replayed_admin_write_is_refused(cirrusmq_stack):
    name = f"replay-admin-{uuid.uuid4().hex[:6]}"
    request = captured(cirrusmq_stack, "POST", "/v1/topics", {"name": name, "queues": 1})
    with httpx.Client(timeout=60) as client:
        assert client.send(request).status_code == 201
        before = stored_state(cirrusmq_stack)
        replay = client.send(request)
    assert (replay.status_code, replay.json()["code"]) == (401, "ReplayedRequest")
    assert stored_state(cirrusmq_stack) == before


# ------------------------------------------------- a local stack's time after advance_time
def wall_signed(stack, method: str, path: str, body: dict | None = None) -> httpx.Request:
    """One request signed with the wall clock (a client that does not follow the stack's)."""
    content = b"" if body is None else json.dumps(body).encode()
    url = httpx.URL(stack.endpoint + path)
    headers = {"content-type": "application/json"} if body is not None else {}
    headers.update(sign(method, url, content, stack.credentials, now=time.time()))
    return httpx.Request(method, url, content=content, headers=headers)


def test_no_replay_is_accepted_after_advance_time(cirrusmq_stack, topic):
    """A captured send and a captured admin key creation, sent after the stack's time moved
    301 s and replayed after it moved 701 s more: whatever the first answer, the replay is
    refused and stores nothing (no message twice, no second admin key and secret)."""
    cirrusmq_stack.advance_time(301)
    send_request = wall_signed(
        cirrusmq_stack,
        "POST",
        f"/v1/topics/{topic}/messages",
        {"messages": [{"body": b64(b"pay 100")}]},
    )
    key_request = wall_signed(
        cirrusmq_stack, "POST", "/v1/keys", {"permissions": {"admin": True}, "description": "r"}
    )
    with httpx.Client(timeout=60) as client:
        firsts = [client.send(send_request), client.send(key_request)]
        cirrusmq_stack.advance_time(701)  # past the nonces' 600 s on the stack's clock
        before = stored_state(cirrusmq_stack)
        replays = [client.send(send_request), client.send(key_request)]
    for first, replay in zip(firsts, replays, strict=True):
        assert replay.status_code == 401, replay.text
        assert replay.json()["code"] in {"RequestExpired", "ReplayedRequest"}
        assert "secret_key" not in replay.text
        assert first.status_code in (200, 201, 401), first.text
    assert stored_state(cirrusmq_stack) == before


def test_a_wall_clock_date_is_refused_with_the_stacks_time_and_the_sdk_follows_it(
    cirrusmq_stack, topic
):
    """After advance_time the service checks dates against the stack's clock only (the clock
    its nonces expire on) and says what time it is; SDK clients sign with that time from
    their next attempt on, so they keep working."""
    from cirrusmq import Admin, Message, Producer

    cirrusmq_stack.advance_time(400)
    with httpx.Client(timeout=60) as client:
        refused = client.send(wall_signed(cirrusmq_stack, "GET", f"/v1/topics/{topic}"))
    assert (refused.status_code, refused.json()["code"]) == (401, "RequestExpired")
    assert abs(refused.json()["details"]["server_time"] - broker_now() * 1000) < 60_000
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        receipt = producer.send(Message(topic, b"after advance_time"))
    assert receipt.offset == 0
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        assert admin.describe_topic(topic).message_count == 1
