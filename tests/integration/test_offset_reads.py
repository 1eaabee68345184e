"""Reads by offset, queue offsets and group offset reset over real HTTP (local stack)."""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import b64, make_topic, receive, send, signed_client, stored_state
from cirrusmq.credentials import Credentials
from cirrusmq_broker import clock
from test_storage_faults import FAULTS, assert_retriable, failing, observed

HOUR = 3600


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def send_batches(api: httpx.Client, topic: str, *sizes: int) -> list[int]:
    """One request per size (bodies 'o<offset>' on a one-queue topic); the stored time of
    each batch's first message."""
    stamps, offset = [], 0
    for size in sizes:
        send(api, topic, *[{"body": b64(f"o{offset + i}".encode())} for i in range(size)])
        stamps.append(read(api, topic, offset, max_messages=1)["messages"][0]["stored_timestamp"])
        offset += size
        time.sleep(0.005)  # distinct stored milliseconds
    return stamps


def read(api: httpx.Client, topic: str, offset: int, queue: int = 0, **params) -> dict:
    response = api.get(
        f"/v1/topics/{topic}/queues/{queue}/messages", params={"offset": offset, **params}
    )
    assert response.status_code == 200, response.text
    return response.json()


def bodies(messages: list[dict]) -> list[str]:
    return [base64.b64decode(m["body"]).decode() for m in messages]


def reset(api: httpx.Client, group: str, topic: str, **body) -> httpx.Response:
    return api.post(f"/v1/groups/{group}/offsets/{topic}/reset", json=body)


# ---------------------------------------------------------------------------- reads
def test_read_by_offset_returns_messages_offsets_and_the_next_offset(api, topic_name):
    make_topic(api, topic_name, queues=1)
    send_batches(api, topic_name, 3, 3, 3)
    page = read(api, topic_name, 2, max_messages=4)
    assert bodies(page["messages"]) == ["o2", "o3", "o4", "o5"]
    assert [m["offset"] for m in page["messages"]] == [2, 3, 4, 5]
    assert (page["next_offset"], page["max_offset"], page["truncated"]) == (6, 9, False)
    assert read(api, topic_name, 9)["messages"] == []


def test_a_long_poll_returns_when_a_message_arrives(api, topic_name):
    make_topic(api, topic_name, queues=1)
    later = threading.Timer(1.0, lambda: send(api, topic_name, {"body": b64(b"late")}))
    later.start()
    try:
        page = read(api, topic_name, 0, wait_seconds=10)
    finally:
        later.join()
    assert bodies(page["messages"]) == ["late"]


def test_offsets_for_a_timestamp_come_from_the_index(api, topic_name):
    make_topic(api, topic_name, queues=1)
    t0, t1, t2 = send_batches(api, topic_name, 2, 3, 4)
    for timestamp, expected in [(t0 - 1, 0), (t1, 2), (t1 + 1, 5), (t2, 5), (t2 + 1, 9)]:
        response = api.get(f"/v1/topics/{topic_name}/offsets", params={"timestamp": timestamp})
        assert response.status_code == 200, response.text
        [queue] = response.json()["queues"]
        assert (queue["min_offset"], queue["max_offset"]) == (0, 9)
        assert queue["timestamp_offset"] == expected, timestamp
    ends = api.get(f"/v1/topics/{topic_name}/offsets", params={"include_min": "false"}).json()
    assert ends["queues"] == [
        {"queue": 0, "min_offset": None, "max_offset": 9, "timestamp_offset": None}
    ]


def test_rewind_by_timestamp_returns_exactly_the_messages_at_or_after_it(api, topic_name):
    make_topic(api, topic_name, queues=1)
    _, t1, _ = send_batches(api, topic_name, 2, 3, 4)
    first = receive(api, "rewinder", topic_name, max_messages=100)
    assert len(first) == 9
    response = reset(api, "rewinder", topic_name, to="timestamp", timestamp=t1)
    assert response.status_code == 200, response.text
    [queue] = response.json()["queues"]
    assert (queue["offset"], queue["previous_cursor"], queue["dropped_leases"]) == (2, 9, 1)
    again = receive(api, "rewinder", topic_name, max_messages=100)
    assert bodies(again) == [f"o{i}" for i in range(2, 9)]
    stale = api.post(  # its lease was dropped; the message was delivered again since
        "/v1/groups/rewinder/ack", json={"receipt_handles": [first[-1]["receipt_handle"]]}
    )
    assert stale.json()["results"][0]["status"] == "expired"


def test_latest_and_per_queue_offsets(api, topic_name):
    make_topic(api, topic_name, queues=2)
    for key in ("a", "b", "c"):
        send(api, topic_name, *[{"body": b64(b"m"), "message_group": key}] * 2)
    latest = reset(api, "skipper", topic_name, to="latest").json()
    assert all(q["offset"] == q["max_offset"] for q in latest["queues"])
    assert receive(api, "skipper", topic_name, max_messages=10) == []
    response = reset(api, "skipper", topic_name, to="offset", offsets={"1": 0})
    assert response.status_code == 200, response.text
    [queue] = response.json()["queues"]
    assert queue["queue"] == 1 and queue["offset"] == 0
    got = receive(api, "skipper", topic_name, max_messages=100)
    assert {m["queue"] for m in got} == {1} and len(got) == queue["max_offset"]


@pytest.fixture
def clock_put_back() -> Iterator[None]:
    """Sets the broker clock back to where it was after the test: left hours ahead, it would
    refuse the SDK's signatures (made with this machine's clock) in later tests."""
    before = clock.offset_ms()
    yield
    clock.reset()
    clock.advance(before / 1000)


def test_rewind_after_retention_starts_at_the_earliest_retained_and_says_so(
    api, cirrusmq_stack, topic_name, clock_put_back
):
    make_topic(api, topic_name, queues=1, retention_hours=1)
    send_batches(api, topic_name, 4)
    cirrusmq_stack.advance_time(2 * HOUR)  # the first batch is past retention
    send(api, topic_name, *[{"body": b64(f"o{i}".encode())} for i in range(4, 7)])
    page = read(api, topic_name, 1)
    assert page["truncated"] and page["start_offset"] == 4
    assert bodies(page["messages"]) == ["o4", "o5", "o6"]
    response = reset(api, "late", topic_name, to="earliest")
    assert response.status_code == 200, response.text
    body = response.json()
    [queue] = body["queues"]
    assert (queue["offset"], queue["min_offset"], queue["truncated"]) == (4, 4, True)
    assert "past retention" in body["note"]
    assert bodies(receive(api, "late", topic_name, max_messages=10)) == ["o4", "o5", "o6"]


# ---------------------------------------------------------------------------- bad input
BAD_READS = [
    ({"offset": -1}, 0, 400, "InvalidOffset"),
    ({"offset": 10**30}, 0, 400, "InvalidOffset"),
    ({"offset": "x"}, 0, 400, "InvalidRequest"),
    ({"offset": 0}, 7, 404, "QueueNotFound"),
    ({"offset": 0}, "q", 404, "QueueNotFound"),
    ({"offset": 0, "max_messages": 0}, 0, 400, "InvalidRequest"),
    ({"offset": 0, "filter": "a ||"}, 0, 400, "InvalidFilterExpression"),
    ({"offset": 0, "wait_seconds": "nan"}, 0, 400, "InvalidRequest"),
]
BAD_RESETS = [
    ({"to": "offset", "offsets": {"0": -1}}, 400, "InvalidOffset"),
    ({"to": "offset", "offsets": {"0": 999}}, 400, "InvalidOffset"),
    ({"to": "offset", "offsets": {"9": 0}}, 404, "QueueNotFound"),
    ({"to": "offset", "offsets": {"zero": 0}}, 400, "InvalidRequest"),
    ({"to": "timestamp", "timestamp": -1}, 400, "InvalidTimestamp"),
    ({"to": "timestamp", "timestamp": "yesterday"}, 400, "InvalidRequest"),
    ({"to": "timestamp"}, 400, "InvalidRequest"),
    ({"to": "sometime"}, 400, "InvalidRequest"),
]


def test_bad_input_is_a_4xx_and_changes_nothing(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, queues=2)
    send(api, topic_name, *[{"body": b64(b"m"), "message_group": "k"}] * 3)
    receive(api, "careful", topic_name, max_messages=1)
    before = stored_state(cirrusmq_stack)
    for params, queue, status, code in BAD_READS:
        response = api.get(f"/v1/topics/{topic_name}/queues/{queue}/messages", params=params)
        assert (response.status_code, response.json()["code"]) == (status, code), params
    for body, status, code in BAD_RESETS:
        response = reset(api, "careful", topic_name, **body)
        assert (response.status_code, response.json()["code"]) == (status, code), body
    offsets = api.get(f"/v1/topics/{topic_name}/offsets", params={"timestamp": 10**16})
    assert (offsets.status_code, offsets.json()["code"]) == (400, "InvalidTimestamp")
    missing = api.get("/v1/topics/no-such-topic/offsets")
    assert (missing.status_code, missing.json()["code"]) == (404, "TopicNotFound")
    assert stored_state(cirrusmq_stack) == before


def test_permissions(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, queues=1)

    def key(permissions: dict) -> Credentials:
        created = api.post("/v1/keys", json={"permissions": permissions}).json()
        return Credentials(created["access_key"], created["secret_key"])

    reader = key({"subscribe": [{"groups": ["mine"], "topics": [topic_name]}]})
    writer = key({"publish": [topic_name]})
    with signed_client(cirrusmq_stack, reader) as client:
        assert client.get(f"/v1/topics/{topic_name}/queues/0/messages?offset=0").status_code == 200
        assert client.get(f"/v1/topics/{topic_name}/offsets").status_code == 200
        assert reset(client, "mine", topic_name, to="latest").status_code == 200
        assert reset(client, "theirs", topic_name, to="latest").status_code == 403
    with signed_client(cirrusmq_stack, writer) as client:
        assert client.get(f"/v1/topics/{topic_name}/queues/0/messages?offset=0").status_code == 403
        assert client.get(f"/v1/topics/{topic_name}/offsets").status_code == 200
        assert reset(client, "mine", topic_name, to="latest").status_code == 403


# ---------------------------------------------------------------------------- faults
@pytest.fixture(scope="module")
def faulted(cirrusmq_stack) -> str:
    topic = unique("offfaults")
    with signed_client(cirrusmq_stack) as api:
        make_topic(api, topic, queues=1)
        send(api, topic, *[{"body": b64(b"x")} for _ in range(4)])
        receive(api, "holder", topic, max_messages=2, invisible_seconds=3600)
    return topic


ROUTES = {
    "read": lambda api, t: lambda: api.get(f"/v1/topics/{t}/queues/0/messages?offset=1"),
    "offsets": lambda api, t: lambda: api.get(f"/v1/topics/{t}/offsets?timestamp=1"),
    "reset": lambda api, t: lambda: reset(api, "holder", t, to="offset", offsets={"0": 1}),
}


@pytest.mark.parametrize("route", ROUTES)
def test_aws_errors_on_every_call_are_retriable_and_a_rerun_succeeds(api, faulted, route):
    with observed() as calls:
        clean = ROUTES[route](api, faulted)()
    assert clean.status_code == 200, clean.text
    hit = set()
    for service, operation in sorted(calls):
        code, aws_status, status, broker_code = FAULTS[service][0]
        with failing(service, operation, code, aws_status) as fired:
            response = ROUTES[route](api, faulted)()
        if fired:
            hit.add((service, operation))
            assert_retriable(response, status, broker_code)
        else:  # cached (e.g. the topic, the batch object)
            assert response.status_code == 200, response.text
        again = ROUTES[route](api, faulted)()
        assert again.status_code == 200, again.text
    assert hit
    if route == "reset":
        [queue] = again.json()["queues"]
        assert queue["offset"] == 1
