"""A receive that carries the previous delivery's acks (``ack``): the ack route's semantics,
permission checks and per-handle results (in ``acks``), then the receive — one request.

Through the local stack over real HTTP; a fault is injected on the handlers' own clients.
"""

from __future__ import annotations

import uuid

from api_helpers import b64, make_topic, narrow_keys, receive, send, signed_client, stored_state
from test_storage_faults import failing


def _topic_with(api, count: int, queues: int = 1) -> str:
    topic = f"ride-{uuid.uuid4().hex[:10]}"
    make_topic(api, topic, queues=queues)
    send(api, topic, *[{"body": b64(f"m{i}".encode())} for i in range(count)])
    return topic


def _receive_acking(api, group: str, topic: str, handles: list[str], **fields):
    return api.post(f"/v1/groups/{group}/receive", json={"topic": topic, "ack": handles, **fields})


def _queue(api, group: str, topic: str) -> dict:
    [queue] = api.get(f"/v1/groups/{group}", params={"topic": topic}).json()["queues"]
    return queue


def test_a_receive_acks_the_handles_it_carries_then_delivers(api):
    topic = _topic_with(api, 4)
    first = receive(api, "g", topic, max_messages=2)
    response = _receive_acking(api, "g", topic, [m["receipt_handle"] for m in first])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["acks"]["acked"] == 2
    assert [(r["receipt_handle"], r["status"]) for r in body["acks"]["results"]] == [
        (m["receipt_handle"], "acked") for m in first
    ]
    assert len(body["messages"]) == 2
    assert {m["message_id"] for m in body["messages"]}.isdisjoint(m["message_id"] for m in first)
    assert _queue(api, "g", topic)["inflight"] == 2  # the first settled, the second held
    again = _receive_acking(api, "g", topic, [m["receipt_handle"] for m in body["messages"]])
    assert again.json()["acks"]["acked"] == 2 and again.json()["messages"] == []
    queue = _queue(api, "g", topic)
    assert (queue["committed_offset"], queue["inflight"]) == (4, 0)


def test_a_receive_without_ack_answers_no_ack_results(api):
    topic = _topic_with(api, 1)
    response = api.post("/v1/groups/g/receive", json={"topic": topic})
    assert response.status_code == 200, response.text
    assert response.json().get("acks") is None


def test_bad_and_stale_handles_get_their_result_and_the_others_are_acked(api):
    topic = _topic_with(api, 3)
    [held] = receive(api, "g", topic, max_messages=1, invisible_seconds=10)
    newer = receive(api, "g", topic, max_messages=2)
    response = _receive_acking(
        api, "g", topic, ["forged.handle", newer[0]["receipt_handle"]], max_messages=1
    )
    assert response.status_code == 200, response.text
    results = response.json()["acks"]["results"]
    assert [(r["status"], r["code"]) for r in results] == [
        ("invalid", "InvalidReceiptHandle"),
        ("acked", None),
    ]
    assert response.json()["acks"]["acked"] == 1
    assert held["receipt_handle"] not in {r["receipt_handle"] for r in results}


def test_a_handle_of_a_topic_the_key_may_not_consume_acks_nothing(cirrusmq_stack):
    world = narrow_keys(cirrusmq_stack)
    with (
        signed_client(cirrusmq_stack) as admin,
        signed_client(cirrusmq_stack, world["consumer"]) as consumer,
    ):
        other = _topic_with(admin, 1)  # not an rv-* topic: the consumer key may not consume it
        [foreign] = receive(admin, "rv-group", other)
        send(admin, world["plain"], {"body": b64(b"mine")})
        response = _receive_acking(
            consumer, "rv-group", world["plain"], [foreign["receipt_handle"]]
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["acks"]["acked"] == 0
        assert [(r["status"], r["code"]) for r in body["acks"]["results"]] == [
            ("invalid", "AccessDenied")
        ]
        assert len(body["messages"]) == 1  # the receive itself is the key's to make
        assert _queue(admin, "rv-group", other)["inflight"] == 1  # the foreign lease is untouched


def test_a_request_level_mistake_in_ack_is_400_and_receives_nothing(api, cirrusmq_stack):
    topic = _topic_with(api, 2)
    receive(api, "g", topic, max_messages=1)
    before = stored_state(cirrusmq_stack)
    for handles in ([], ["h"] * 1001, "not-a-list"):
        response = _receive_acking(api, "g", topic, handles)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "InvalidRequest"
    assert stored_state(cirrusmq_stack) == before


def test_a_retriable_failure_of_the_ack_fails_the_request_before_receiving(api):
    topic = _topic_with(api, 4)
    first = receive(api, "g", topic, max_messages=2)
    handles = [m["receipt_handle"] for m in first]
    with failing("dynamodb", "DeleteItem", "InternalServerError", 500) as fired:
        response = _receive_acking(api, "g", topic, handles, max_messages=2)
    assert fired
    assert (response.status_code, response.json()["code"]) == (503, "Busy"), response.text
    queue = _queue(api, "g", topic)
    assert (queue["cursor"], queue["inflight"]) == (2, 2)  # nothing received, nothing acked
    retried = _receive_acking(api, "g", topic, handles, max_messages=2)  # the client retries
    assert retried.json()["acks"]["acked"] == 2
    assert len(retried.json()["messages"]) == 2


def test_a_receive_refused_as_bad_input_acks_nothing(api):
    topic = _topic_with(api, 2)
    [held] = receive(api, "g", topic, max_messages=1)  # records the filter '*'
    handles = [held["receipt_handle"]]
    for bad in (
        {"topic": f"{topic}-missing"},
        {"topic": topic, "filter": "TagA"},  # not the group's subscription
        {"topic": topic, "client_id": "bad id with spaces"},
    ):
        response = api.post("/v1/groups/g/receive", json={**bad, "ack": handles})
        assert 400 <= response.status_code < 500, (bad, response.text)
    assert _queue(api, "g", topic)["inflight"] == 1


def test_a_mistake_in_ack_stores_nothing_on_a_group_never_received_from(api, cirrusmq_stack):
    topic = _topic_with(api, 2)
    before = stored_state(cirrusmq_stack)
    for handles in ([], ["h"] * 1001):
        response = _receive_acking(api, "fresh", topic, handles, filter="TagA")
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "InvalidRequest"
    assert stored_state(cirrusmq_stack) == before  # not even the group's subscription


def test_an_over_long_handle_is_refused_before_anything_is_acked(api):
    topic = _topic_with(api, 2)
    [held] = receive(api, "g", topic, max_messages=1)
    too_long = "x" * 4097  # a real handle is under 1,100 characters; results echo handles
    for path, body in (
        ("ack", {"receipt_handles": [held["receipt_handle"], too_long]}),
        ("nack", {"receipt_handles": [held["receipt_handle"], too_long]}),
        ("receive", {"topic": topic, "ack": [held["receipt_handle"], too_long]}),
    ):
        response = api.post(f"/v1/groups/g/{path}", json=body)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["code"] == "InvalidRequest"
    assert _queue(api, "g", topic)["inflight"] == 1
