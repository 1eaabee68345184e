"""Retention edges over HTTP, with the stack's clock moved instead of waiting.

Both scenarios failed before queue heads and the expired-batch skip: offsets restarted at 0
after an idle queue's index expired (the group never saw new messages, lag 0), and a group
behind more than a page of expired-but-not-yet-deleted batches got empty receives forever.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from api_helpers import ack, b64, make_topic, receive, send, signed_client
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock
from cirrusmq_broker.container import broker_for

HOUR = 3600


@pytest.fixture(scope="module")
def lagging_ttl_stack() -> Iterator[LocalStack]:
    """A stack whose TTL never runs by itself: DynamoDB's TTL may lag up to 48 h."""
    with LocalStack(schedules=False, expire_interval=None) as stack:
        yield stack


def test_offsets_continue_after_an_idle_queue_expired(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, queues=1, retention_hours=1)
    for i in range(10):
        send(api, topic_name, {"body": b64(b"old %d" % i)})
    got = receive(api, "idle", topic_name, max_messages=10)
    assert ack(api, "idle", got).json()["acked"] == 10

    deleted = cirrusmq_stack.advance_time(2 * HOUR)  # retention passes; TTL deletes the index
    assert deleted["items"] >= 10
    broker_for.cache_clear()  # the next send lands on a cold container: no cached tail

    [receipt] = send(api, topic_name, {"body": b64(b"new")})["receipts"]
    assert receipt["offset"] == 10
    [queue] = api.get("/v1/groups/idle", params={"topic": topic_name}).json()["queues"]
    assert queue["lag"] == 1
    [message] = receive(api, "idle", topic_name)
    assert base64.b64decode(message["body"]) == b"new"


def test_a_group_gets_past_expired_batches_ttl_has_not_deleted(lagging_ttl_stack):
    with signed_client(lagging_ttl_stack) as api:
        make_topic(api, "lagging", queues=1, retention_hours=1)
        for _ in range(150):  # more than a page of the index
            send(api, "lagging", {"body": b64(b"old")})
        clock.advance(2 * HOUR)  # expired; nothing deletes them (TTL lags)
        send(api, "lagging", {"body": b64(b"live")})

        [message] = receive(api, "behind", "lagging", wait_seconds=2)
        assert base64.b64decode(message["body"]) == b"live"
        [queue] = api.get("/v1/groups/behind").json()["queues"]
        assert queue["cursor"] == 151  # the skip is stored, not redone on every poll
