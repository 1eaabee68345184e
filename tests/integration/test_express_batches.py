"""A local stack deployed with ``BatchStorage=express``: the template's directory bucket
holds the topics' batch objects, under the directory bucket rules (no tags, no
``StartAfter``, unordered listings: infra/cirrusmq_local/directory_buckets.py), through
real HTTP: produce, receive, ack, lookup by id, the orphan sweep and the purge."""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import ack, b64, make_topic, receive, send, signed_client
from cirrusmq.testing import LocalStack
from cirrusmq_broker.clock import now_ms
from cirrusmq_broker.container import Broker
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage.appends import BatchAppender


class SimulatedCrash(BaseException):
    """The Lambda process dies at this point."""


def crash(*_args, **_kwargs):
    raise SimulatedCrash()


@pytest.fixture(scope="module")
def cirrusmq_stack() -> Iterator[LocalStack]:
    parameters = {"BatchStorage": "express", "ExpressZoneId": "use1-az4"}
    with LocalStack(schedules=False, parameters=parameters) as stack:
        yield stack


@pytest.fixture
def topic_name() -> str:
    return f"x-{uuid.uuid4().hex[:10]}"


def batch_keys(stack: LocalStack, topic: str) -> list[str]:
    s3, keys = stack.boto3_client("s3"), []
    request = {"Bucket": stack.resources["BatchDirectoryBucket"]}
    while True:
        page = s3.list_objects_v2(**request)
        keys += [o["Key"] for o in page.get("Contents", []) if f"/topic={topic}/" in o["Key"]]
        if not page.get("IsTruncated"):
            return keys
        request["ContinuationToken"] = page["NextContinuationToken"]


def drain(api: httpx.Client, group: str, topic: str) -> list[bytes]:
    got = []
    while batch := receive(api, group, topic, max_messages=100):
        got += [base64.b64decode(m["body"]) for m in batch]
        assert ack(api, group, batch).status_code == 200
    return sorted(got)


def test_messages_round_trip_through_the_directory_bucket(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, queues=2)
    sent = send(api, topic_name, {"body": b64(b"one")}, {"body": b64(b"two")})
    keys = batch_keys(cirrusmq_stack, topic_name)
    assert keys and all(k.startswith("retention_days=3/topics/") for k in keys)
    s3 = cirrusmq_stack.boto3_client("s3")
    general = s3.list_objects_v2(
        Bucket=cirrusmq_stack.resources["MessageBucket"], Prefix=f"topics/topic={topic_name}/"
    )
    assert not general.get("Contents")  # nothing of the topic in the message bucket
    message_id = sent["receipts"][0]["message_id"]
    found = api.get(f"/v1/topics/{topic_name}/messages/{message_id}")
    assert found.status_code == 200 and base64.b64decode(found.json()["body"]) == b"one"
    assert drain(api, "g", topic_name) == [b"one", b"two"]


def test_the_sweeper_finds_an_orphan_and_the_purge_empties_the_topic(
    api, cirrusmq_stack, topic_name, monkeypatch
):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, {"body": b64(b"kept")})
    monkeypatch.setattr(BatchAppender, "append", crash)
    with contextlib.suppress(httpx.TransportError):
        api.post(f"/v1/topics/{topic_name}/messages", json={"messages": [{"body": b64(b"x")}]})
    monkeypatch.undo()
    assert len(batch_keys(cirrusmq_stack, topic_name)) == 2
    cirrusmq_stack.run_schedule("JanitorFunction", "SweepOrphans")
    assert len(batch_keys(cirrusmq_stack, topic_name)) == 2  # young: a produce may be in flight
    # the janitor an hour later (the stack's handlers read the same settings)
    later = Broker(Settings.from_env(), clock=lambda: now_ms() + 3600_000)
    assert later.settings.batch_storage == "express"
    assert later.janitor.sweep_orphans().deleted >= 1
    assert len(batch_keys(cirrusmq_stack, topic_name)) == 1
    assert drain(api, "g", topic_name) == [b"kept"]
    assert api.delete(f"/v1/topics/{topic_name}").status_code < 300
    assert topic_name in later.janitor.purge_deleted_topics()
    assert batch_keys(cirrusmq_stack, topic_name) == []


@pytest.fixture
def api(cirrusmq_stack) -> Iterator[httpx.Client]:
    with signed_client(cirrusmq_stack) as client:
        yield client


def test_the_stacks_spark_options_name_the_directory_bucket(cirrusmq_stack):
    options = cirrusmq_stack.spark_options()
    assert options["batchBucket"] == cirrusmq_stack.resources["BatchDirectoryBucket"]
    assert options["bucket"] == cirrusmq_stack.resources["MessageBucket"]
