"""Through a local stack over real HTTP: ``GET /v1/groups`` lists the groups a key may see
(with the topics it may consume as each), and ``GET /v1/groups/{group}/metrics`` reads the
GroupMetricsFunction's series back from CloudWatch (moto's, fed by the local stack) — the
lag falls on it as the group consumes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import ack, b64, make_topic, new_key, receive, send, signed_client
from cirrusmq_local import LocalStack


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    local = LocalStack(schedules=False)
    try:
        yield local.start()
    finally:
        local.stop()


@pytest.fixture
def api(stack: LocalStack) -> Iterator[httpx.Client]:
    with signed_client(stack) as client:
        yield client


def emit_group_metrics(stack: LocalStack) -> dict:
    return stack.run_schedule("GroupMetricsFunction", "EmitGroupMetrics")


def test_the_group_list_shows_only_the_groups_a_key_may_see(stack, api):
    suffix = uuid.uuid4().hex[:6]
    mine, theirs = f"gl-{suffix}", f"other-{suffix}"
    make_topic(api, mine, queues=1)
    make_topic(api, theirs, queues=1)
    send(api, mine, {"body": b64(b"a")})
    send(api, theirs, {"body": b64(b"b")})
    receive(api, f"gl-group-{suffix}", mine)
    receive(api, f"gl-group-{suffix}", theirs)  # the same group on a topic the key may not read
    receive(api, f"other-group-{suffix}", theirs)
    listed = api.get("/v1/groups")
    assert listed.status_code == 200, listed.text
    by_name = {g["group"]: g["topics"] for g in listed.json()["groups"]}
    assert by_name[f"gl-group-{suffix}"] == sorted([mine, theirs])
    assert by_name[f"other-group-{suffix}"] == [theirs]
    narrow = new_key(api, {"subscribe": [{"groups": ["gl-*"], "topics": ["gl-*"]}]})
    with signed_client(stack, narrow) as client:
        seen = client.get("/v1/groups")
    assert seen.status_code == 200, seen.text
    assert [g for g in seen.json()["groups"] if g["group"].endswith(suffix)] == [
        {"group": f"gl-group-{suffix}", "topics": [mine]}
    ]
    with signed_client(stack, new_key(api, {})) as nobody:
        assert nobody.get("/v1/groups").json() == {"groups": []}


def test_the_lag_falls_on_the_metrics_read_back_from_cloudwatch(stack, api):
    topic, group = f"lag-{uuid.uuid4().hex[:6]}", f"lag-group-{uuid.uuid4().hex[:6]}"
    make_topic(api, topic, queues=1)
    send(api, topic, *[{"body": b64(b"m%d" % i)} for i in range(6)])
    got = receive(api, group, topic, max_messages=2)
    emit_group_metrics(stack)
    stack.advance_time(60)
    assert ack(api, group, got).status_code == 200
    more = receive(api, group, topic, max_messages=3)
    assert ack(api, group, more).status_code == 200
    emit_group_metrics(stack)

    answer = api.get(f"/v1/groups/{group}/metrics", params={"minutes": 60})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["group"] == group and body["period_seconds"] == 60
    assert body["end"] - body["start"] == 60 * 60_000
    [series] = body["topics"]
    assert series["topic"] == topic
    assert [p["lag"] for p in series["points"]] == [6, 1]
    assert [p["in_flight"] for p in series["points"]] == [2, 0]
    first, second = series["points"]
    assert second["timestamp"] - first["timestamp"] == 60_000
    assert first["oldest_unacked_age_seconds"] >= 0
    assert [p["dead_letters"] for p in body["dead_letters"]] == [0, 0]
    assert body["truncated"] is False
    only = api.get(f"/v1/groups/{group}/metrics", params={"minutes": 1})
    assert [p["lag"] for p in only.json()["topics"][0]["points"]] == [1]
    # the group's dead letters span all its topics and their list is an admin's to read:
    # a key that may consume only this topic sees its lag, not the group's dead letters
    consumer = new_key(api, {"subscribe": [{"groups": [group], "topics": [topic]}]})
    with signed_client(stack, consumer) as client:
        narrow = client.get(f"/v1/groups/{group}/metrics", params={"minutes": 60}).json()
    assert [p["lag"] for p in narrow["topics"][0]["points"]] == [6, 1]
    assert narrow["dead_letters"] == []


def test_the_metrics_route_refuses_bad_minutes_and_other_keys(stack, api):
    for minutes in ("0", "361", "soon"):
        refused = api.get("/v1/groups/any-group/metrics", params={"minutes": minutes})
        assert refused.status_code == 400, refused.text
        assert refused.json()["code"] in {"InvalidRequest", "ValidationError"}
    too_long = api.get("/v1/groups/g/metrics", params={"topic": "t" * 300})
    assert (too_long.status_code, too_long.json()["code"]) == (400, "InvalidTopicName")
    narrow = new_key(api, {"subscribe": [{"groups": ["gl-*"], "topics": ["gl-*"]}]})
    with signed_client(stack, narrow) as client:
        denied = client.get("/v1/groups/other-group/metrics")
        assert (denied.status_code, denied.json()["code"]) == (403, "AccessDenied")
        off_topic = client.get("/v1/groups/gl-x/metrics", params={"topic": "other"})
        assert (off_topic.status_code, off_topic.json()["code"]) == (403, "AccessDenied")
        empty = client.get("/v1/groups/gl-nothing/metrics")
        assert empty.status_code == 200, empty.text
        assert empty.json()["topics"] == [] and empty.json()["dead_letters"] == []
