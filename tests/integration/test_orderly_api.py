"""Orderly consumption over HTTP: client ids on receive, queue locks, heartbeats, the group's
consumer listing, deregistration, and bad input (4xx, nothing stored)."""

from __future__ import annotations

import uuid

import pytest
from api_helpers import ack, b64, make_topic, receive, send, signed_client
from cirrusmq import Admin, Permissions, SubscribeGrant


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def message(text: str, key: str = "k1") -> dict:
    return {"body": b64(text.encode()), "message_group": key}


def heartbeat(api, group: str, client_id: str, topic: str, **fields):
    return api.post(
        f"/v1/groups/{group}/heartbeat",
        json={"client_id": client_id, "subscriptions": {topic: "*"}, "orderly": True, **fields},
    )


def consumers(api, group: str) -> list[dict]:
    response = api.get(f"/v1/groups/{group}")
    assert response.status_code == 200, response.text
    return response.json()["consumers"]


def test_fifo_send_without_message_group_is_refused(api, topic_name):
    make_topic(api, topic_name, message_type="FIFO", queues=2)
    response = api.post(
        f"/v1/topics/{topic_name}/messages", json={"messages": [{"body": b64(b"x")}]}
    )
    assert response.status_code == 400 and response.json()["code"] == "MessageGroupRequired"
    assert api.get(f"/v1/topics/{topic_name}").json()["queue_offsets"][0]["max_offset"] == 0


def test_lock_held_gives_a_second_consumer_nothing_and_groups_are_independent(
    api, cirrusmq_stack, topic_name
):
    make_topic(api, topic_name, message_type="FIFO", queues=1)
    send(api, topic_name, message("a"), message("b"))
    group = unique("g")
    [first] = receive(api, group, topic_name, client_id="one", max_messages=1)
    assert ack(api, group, [first]).status_code == 200
    assert receive(api, group, topic_name, client_id="two") == []  # one holds the queue
    other = receive(api, unique("g"), topic_name, client_id="two", max_messages=10)
    assert [m["offset"] for m in other] == [0, 1]  # another group: its own lock
    [second] = receive(api, group, topic_name, client_id="one")
    assert second["offset"] == 1


def test_heartbeat_lists_consumers_with_their_queues_and_deregistration_releases(
    api, cirrusmq_stack, topic_name
):
    make_topic(api, topic_name, message_type="FIFO", queues=3)
    group = unique("g")
    for client in ("b", "a"):
        response = heartbeat(api, group, client, topic_name, heartbeat_timeout_seconds=600)
        assert response.status_code == 200, response.text
    listed = {c["client_id"]: c["topics"][0]["queues"] for c in consumers(api, group)}
    assert listed == {"a": [0, 1], "b": [2]}
    send(api, topic_name, *[message(str(i), key=f"k{i}") for i in range(30)])
    got = receive(api, group, topic_name, client_id="b", max_messages=100)
    assert got and {m["queue"] for m in got} == {2}
    assert api.delete(f"/v1/groups/{group}/consumers/b").status_code == 204
    assert [c["client_id"] for c in consumers(api, group)] == ["a"]
    # b's delivery is still in flight (its lease), so a gets queues 0 and 1 now ...
    assert {
        m["queue"] for m in receive(api, group, topic_name, client_id="a", max_messages=100)
    } <= {0, 1}
    assert ack(api, group, got).status_code == 200
    # ... and queue 2 as soon as b's delivery is acked: the lock went with the deregistration
    send(api, topic_name, *[message(str(i), key=f"k{i}") for i in range(30)])
    late = receive(api, group, topic_name, client_id="a", max_messages=100)
    assert {m["queue"] for m in late} == {2}
    cirrusmq_stack.advance_time(121)  # past the default timeout (120 s): a's own holds
    assert [c["client_id"] for c in consumers(api, group)] == ["a"]
    cirrusmq_stack.advance_time(480)  # a's heartbeat timeout (600 s) passes: it is gone too
    assert consumers(api, group) == []


@pytest.mark.parametrize(
    ("method", "path", "body", "code"),
    [
        ("POST", "heartbeat", {"client_id": "bad id", "subscriptions": {}}, "InvalidClientId"),
        ("POST", "heartbeat", {"client_id": "x" * 129}, "InvalidClientId"),
        (
            "POST",
            "heartbeat",
            {"client_id": "ok", "heartbeat_timeout_seconds": 1},
            "InvalidDuration",
        ),
        (
            "POST",
            "heartbeat",
            {"client_id": "ok", "heartbeat_timeout_seconds": 4000},
            "InvalidDuration",
        ),
        ("POST", "heartbeat", {"client_id": "ok", "surprise": 1}, "InvalidRequest"),
        ("POST", "heartbeat", {"client_id": "ok", "orderly": "yes"}, "InvalidRequest"),
        (
            "POST",
            "heartbeat",
            {"client_id": "ok", "subscriptions": {"{topic}": "A || || B"}},
            "InvalidFilterExpression",
        ),
        (
            "POST",
            "heartbeat",
            {"client_id": "ok", "subscriptions": {"bad name": "*"}},
            "InvalidTopicName",
        ),
        (
            "POST",
            "heartbeat",
            {"client_id": "ok", "subscriptions": {"nope-404": "*"}},
            "TopicNotFound",
        ),
        ("POST", "receive", {"topic": "{topic}", "client_id": "bad/id"}, "InvalidClientId"),
        ("POST", "receive", {"topic": "{topic}", "client_id": ""}, "InvalidClientId"),
        ("DELETE", "consumers/bad%20id", None, "InvalidClientId"),
    ],
)
def test_bad_input_is_a_4xx_and_registers_nothing(api, topic_name, method, path, body, code):
    make_topic(api, topic_name, message_type="FIFO", queues=1)
    group = unique("g")
    if body is not None:
        text = str(body).replace("{topic}", topic_name)
        body = eval(text)  # noqa: S307 - the test's own literals
    response = api.request(method, f"/v1/groups/{group}/{path}", json=body)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["code"] == code
    assert consumers(api, group) == []


def test_change_invisible_zero_only_on_fifo_topics(api, topic_name):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, {"body": b64(b"x")})
    group = unique("g")
    [got] = receive(api, group, topic_name)
    response = api.post(
        f"/v1/groups/{group}/invisible",
        json={"receipt_handle": got["receipt_handle"], "invisible_seconds": 0},
    )
    assert response.status_code == 400 and response.json()["code"] == "InvalidDuration"


def test_heartbeat_needs_the_permission_to_consume_each_topic(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, message_type="FIFO", queues=1)
    group = unique("g")
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        key = admin.create_access_key(
            Permissions(subscribe=(SubscribeGrant((group,), ("other-*",)),))
        )
    with signed_client(cirrusmq_stack, key.credentials) as narrow:
        response = heartbeat(narrow, group, "c1", topic_name)
        assert response.status_code == 403 and response.json()["code"] == "AccessDenied"
    assert consumers(api, group) == []


def test_after_the_last_attempt_a_fifo_message_goes_to_the_dlq_and_the_queue_moves_on(
    api, topic_name
):
    """Documented: a FIFO message redelivered in place past the group's maximum attempts
    (16) goes to ``dlq.<group>`` and is settled; the next message of its queue follows."""
    make_topic(api, topic_name, message_type="FIFO", queues=1)
    send(api, topic_name, message("poison"), message("next"))
    group = unique("g")
    for attempt in range(1, 18):
        got = receive(api, group, topic_name, client_id="c", max_messages=1)
        if not got or got[0]["offset"] != 0:
            break
        assert got[0]["delivery_attempt"] == attempt
        response = api.post(
            f"/v1/groups/{group}/invisible",
            json={"receipt_handle": got[0]["receipt_handle"], "invisible_seconds": 0},
        )
        assert response.status_code == 200
    assert [m["offset"] for m in got] == [1]
    dead = api.get(f"/v1/groups/{group}/dead-letters").json()["dead_letters"]
    assert [(d["body_preview"], d["origin_offset"], d["delivery_attempts"]) for d in dead] == [
        (b64(b"poison"), 0, 16)
    ]


def test_a_handle_of_an_earlier_delivery_cannot_change_the_invisible_time(api, topic_name):
    """The native API refuses a handle whose lease was redelivered since (SQS queues take it
    for the message's current receive)."""
    make_topic(api, topic_name, message_type="FIFO", queues=1)
    send(api, topic_name, message("once"))
    group = unique("g")
    [first] = receive(api, group, topic_name, client_id="c", invisible_seconds=60)
    released = api.post(
        f"/v1/groups/{group}/invisible",
        json={"receipt_handle": first["receipt_handle"], "invisible_seconds": 0},
    )
    assert released.status_code == 200, released.text
    [again] = receive(api, group, topic_name, client_id="c", invisible_seconds=60)
    assert (again["offset"], again["delivery_attempt"]) == (first["offset"], 2)
    for seconds in (0, 120):
        stale = api.post(
            f"/v1/groups/{group}/invisible",
            json={"receipt_handle": first["receipt_handle"], "invisible_seconds": seconds},
        )
        assert stale.status_code == 400 and stale.json()["code"] == "ReceiptHandleExpired"
    assert receive(api, group, topic_name, client_id="c") == []
    assert ack(api, group, [again]).json()["acked"] == 1
