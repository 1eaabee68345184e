"""A produce that dies at any step loses nothing and duplicates nothing.

The handlers run in the local stack's process, so a crash is injected by making one step
raise ``SimulatedCrash`` (a BaseException, which no handler code catches: the Lambda dies
there and the gateway answers 5xx, as API Gateway does). The client then retries with the
same producer id + sequence, as the SDK does.
"""

from __future__ import annotations

import base64

import httpx
import pytest
from api_helpers import ack, b64, make_topic, max_offsets, object_keys, receive, send
from cirrusmq_broker.clock import now_ms
from cirrusmq_broker.container import Broker
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage.appends import BatchAppender


class SimulatedCrash(BaseException):
    """The Lambda process dies at this point."""


def crash(*_args, **_kwargs):
    raise SimulatedCrash()


_append = BatchAppender.append


def crash_after_append(self, *args, **kwargs):
    """The append's transaction commits, then the Lambda dies before it answers."""
    _append(self, *args, **kwargs)
    raise SimulatedCrash()


def crashed(response_or_error) -> bool:
    return (
        isinstance(response_or_error, httpx.TransportError) or response_or_error.status_code >= 500
    )


def post_dying(api, topic, body: bytes, **request):
    """A request whose Lambda dies: 5xx, or the connection drops."""
    try:
        return post(api, topic, body, **request)
    except httpx.TransportError as exc:
        return exc


def post(api, topic, body: bytes, **request):
    return api.post(
        f"/v1/topics/{topic}/messages", json={"messages": [{"body": b64(body)}], **request}
    )


def drain(api, group, topic) -> list[dict]:
    got = []
    while batch := receive(api, group, topic, max_messages=100):
        got += batch
        ack(api, group, batch)
    return got


def test_crash_between_object_write_and_index_append_leaves_an_invisible_orphan(
    api, cirrusmq_stack, topic_name, monkeypatch
):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, {"body": b64(b"before")})
    monkeypatch.setattr(BatchAppender, "append", crash)
    assert crashed(post_dying(api, topic_name, b"lost in the crash"))
    monkeypatch.undo()

    assert len(object_keys(cirrusmq_stack, topic_name)) == 2  # the orphan is in S3 ...
    assert max_offsets(api, topic_name) == [1]  # ... but not in the log
    send(api, topic_name, {"body": b64(b"after")})
    delivered = drain(api, "orphan-check", topic_name)
    assert [m["offset"] for m in delivered] == [0, 1]  # no gap, no orphan
    assert b"lost in the crash" not in [base64.b64decode(m["body"]) for m in delivered]

    # The scheduled sweeper leaves young objects alone (a produce may still be in flight;
    # older orphans of other tests in this session stack may go) ...
    cirrusmq_stack.run_schedule("JanitorFunction", "SweepOrphans")
    assert len(object_keys(cirrusmq_stack, topic_name)) == 3
    # ... and deletes the orphan once it is older than the grace period.
    later = Broker(Settings.from_env(), clock=lambda: now_ms() + 3600_000)
    report = later.janitor.sweep_orphans()
    assert report.deleted >= 1
    assert len(object_keys(cirrusmq_stack, topic_name)) == 2
    assert len(drain(api, "after-sweep", topic_name)) == 2


@pytest.mark.parametrize(
    "dying_append",
    [crash, crash_after_append],
    ids=["after-object-write", "after-index-append"],
)
def test_retry_after_a_crash_stores_exactly_once(
    api, cirrusmq_stack, topic_name, monkeypatch, dying_append
):
    make_topic(api, topic_name, queues=2)
    stamp = {"producer_id": f"crashy-{dying_append.__name__}", "sequence": 1}
    monkeypatch.setattr(BatchAppender, "append", dying_append)
    assert crashed(post_dying(api, topic_name, b"exactly once", **stamp))
    monkeypatch.undo()

    retried = post(api, topic_name, b"exactly once", **stamp)
    assert retried.status_code == 200, retried.text
    [receipt] = retried.json()["receipts"]
    assert sum(max_offsets(api, topic_name)) == 1
    assert len(object_keys(cirrusmq_stack, topic_name)) == 1  # the retry reused the object
    delivered = drain(api, "once", topic_name)
    assert [m["message_id"] for m in delivered] == [receipt["message_id"]]
    found = api.get(f"/v1/topics/{topic_name}/messages/{receipt['message_id']}")
    assert found.status_code == 200
