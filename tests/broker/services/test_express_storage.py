"""Batch objects in an S3 Express One Zone directory bucket (``batch_storage="express"``).

moto has no directory buckets: the batch bucket here is an ordinary moto bucket on which
``enforce_directory_bucket_rules`` (infra/cirrusmq_local/directory_buckets.py) refuses object
tags and ``StartAfter`` and lists keys in no lexicographic order, as S3 does for a directory
bucket. moto stamps LastModified with the FakeClock (``s3_clock``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator

import boto3
import pytest
from botocore.exceptions import ClientError
from broker_helpers import index_items, send
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.transaction_state import Resolution
from cirrusmq_broker.services import janitor as janitor_module
from cirrusmq_broker.services.janitor import OVERLAP_MS, PURGE_DELAY_SECONDS
from cirrusmq_broker.storage.appends import BatchAppender
from cirrusmq_broker.storage.batch_objects import BatchObjectStore, StandardLayout
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_local.directory_buckets import enforce_directory_bucket_rules

EXPRESS_BUCKET = "cirrusmq-batches-local-express"
GRACE_S = 300
DAY_S = 86_400


class SimulatedCrash(BaseException):
    pass


@pytest.fixture
def directory_bucket(aws: None) -> Iterator[str]:
    """An ordinary moto bucket held to the directory bucket rules while the test runs."""
    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=EXPRESS_BUCKET)
    undo = enforce_directory_bucket_rules(EXPRESS_BUCKET)
    try:
        yield EXPRESS_BUCKET
    finally:
        undo()


@pytest.fixture
def express(settings, clock, directory_bucket: str) -> Broker:
    """A broker whose topics' batch objects go to the directory bucket."""
    chosen = dataclasses.replace(settings, batch_bucket=directory_bucket, batch_storage="express")
    return Broker(chosen, clock)


def keys_in(bucket: str) -> list[str]:
    s3 = boto3.client("s3", region_name="us-east-1")
    keys, request = [], {"Bucket": bucket}
    while True:
        page = s3.list_objects_v2(**request)
        keys += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return sorted(keys)
        request["ContinuationToken"] = page["NextContinuationToken"]


def crash_produce(broker: Broker, monkeypatch, topic: str = "t") -> None:
    """A produce that dies between its object write and its index append."""
    with monkeypatch.context() as patch:
        patch.setattr(
            BatchAppender, "append", lambda *a, **k: (_ for _ in ()).throw(SimulatedCrash())
        )
        with pytest.raises(SimulatedCrash):
            broker.produce.send(topic, [MessageInput(b"orphaned")])


def orphan(broker: Broker, clock, topic: str = "t", queue: int = 0) -> str:
    key = broker.objects.key_for(topic, queue, clock.now, retention_hours=72)
    assert broker.objects.put(key, b"not parquet", retention_hours=72)
    return key


def bodies(broker: Broker, topic: str = "t") -> list[bytes]:
    got = []
    while batch := broker.consume.receive("g", topic, max_messages=100):
        got += [m.message.body for m in batch]
        broker.consume.ack("g", [m.receipt_handle for m in batch])
    return sorted(got)


# ------------------------------------------------------------------ the rules themselves
def test_a_directory_bucket_refuses_what_the_general_purpose_layout_relies_on(
    directory_bucket, clock
):
    """The general purpose layout (tags, StartAfter, key order) cannot work there."""
    s3 = boto3.client("s3", region_name="us-east-1")
    general = BatchObjectStore(s3, directory_bucket, layout=StandardLayout())
    with pytest.raises(ClientError) as refused:
        general.put("topics/topic=t/queue=0/dt=2026-09-21/a.parquet", b"x", retention_hours=72)
    assert refused.value.response["Error"]["Code"] == "NotImplemented"  # Tagging
    keys = [f"topics/topic=t/queue=0/dt=2026-09-21/{n:03d}.parquet" for n in range(30)]
    for key in keys:
        s3.put_object(Bucket=directory_bucket, Key=key, Body=b"x")
    with pytest.raises(ClientError) as refused:
        general.list_page("topics/topic=t/queue=0/", position=keys[3])
    assert refused.value.response["Error"]["Code"] == "InvalidArgument"  # StartAfter
    with pytest.raises(ClientError):
        s3.list_objects_v2(Bucket=directory_bucket, Prefix="topics/topic=t/queue=0/dt=")
    listed = [o.key for o in general.list("topics/topic=t/")]
    assert sorted(listed) == keys and listed != keys  # all of them, not in key order


# ------------------------------------------------------------------ writing and reading
def test_a_batch_object_carries_its_retention_tier_in_its_key_and_no_tag(express):
    express.admin.create_topic("t", queues=1, retention_hours=72)
    express.admin.create_topic("short", queues=1, retention_hours=20)
    send(express, "t", b"a")
    send(express, "short", b"b")
    keys = keys_in(EXPRESS_BUCKET)
    assert [k.split("/topics/")[0] for k in keys] == ["retention_days=1", "retention_days=3"]
    assert all("/topics/topic=" in k and k.endswith(".parquet") for k in keys)
    s3 = boto3.client("s3", region_name="us-east-1")
    assert not s3.list_objects_v2(Bucket=express.settings.bucket).get("Contents")
    indexed = sorted(i["object_key"]["S"] for i in index_items(express))
    assert indexed == keys  # the index names the object where it is


def test_produce_receive_ack_and_lookup_go_to_the_directory_bucket(express):
    express.admin.create_topic("t", queues=2)
    receipts = send(express, "t", b"one", b"two", b"three")
    assert bodies(express) == [b"one", b"three", b"two"]
    found = express.lookup.lookup("t", receipts[1].message_id)
    assert found.body == b"two"


def test_a_committed_transaction_writes_its_topic_object_to_the_directory_bucket(express):
    tables = boto3.client("dynamodb", region_name="us-east-1").list_tables()["TableNames"]
    table = next(t for t in tables if "TransactionsTable" in t)
    b = Broker(dataclasses.replace(express.settings, transactions_table=table), express.clock)
    b.admin.create_topic("pay", queues=1, message_type="TRANSACTION")
    b.transactions.register("pg", "p1")
    b.transactions.send(
        "pg", "tx1", transactional_id="p1", epoch=1, topic_name="pay", inputs=[MessageInput(b"$")]
    )
    b.transactions.end("pg", "tx1", Resolution.COMMIT, producer=("p1", 1))
    assert bodies(b, "pay") == [b"$"]
    assert [k for k in keys_in(EXPRESS_BUCKET) if "/topics/topic=pay/" in k]


# ------------------------------------------------------------------ the janitor
def test_the_sweep_deletes_orphans_only_over_an_unordered_listing(
    express, clock, s3_clock, monkeypatch
):
    monkeypatch.setattr(janitor_module, "LIST_PAGE", 3)  # many pages, each out of order
    express.admin.create_topic("t", queues=2)
    for n in range(8):
        send(express, "t", b"m%d" % n)
    crash_produce(express, monkeypatch)
    old = [orphan(express, clock, queue=q) for q in (0, 1)]
    clock.advance(GRACE_S - 30)
    young = orphan(express, clock, queue=1)
    assert express.janitor.sweep_orphans().deleted == 0
    clock.advance(60)
    report = express.janitor.sweep_orphans()
    assert (report.examined, report.deleted, report.failed) == (11, 3, 0)
    remaining = keys_in(EXPRESS_BUCKET)
    assert young in remaining and not set(old) & set(remaining)
    assert {i["object_key"]["S"] for i in index_items(express)} <= set(remaining)
    assert len(bodies(express)) == 8
    clock.advance(GRACE_S)
    assert express.janitor.sweep_orphans().deleted == 1  # the young one, now old
    assert young not in keys_in(EXPRESS_BUCKET)


def test_a_later_pass_examines_only_what_was_written_since_but_lists_the_whole_queue(
    express, clock, s3_clock
):
    """No listing by day in a directory bucket: a pass lists the queue in every tier,
    the write time picks what it examines."""
    express.admin.create_topic("t", queues=1)
    for n in range(4):
        send(express, "t", b"m%d" % n)
    clock.advance(GRACE_S + OVERLAP_MS / 1000 + 60)
    assert express.janitor.sweep_orphans().examined == 4
    clock.advance(DAY_S)  # another day: its objects are under another dt= prefix
    send(express, "t", b"next-day")
    lost = orphan(express, clock)
    clock.advance(GRACE_S + OVERLAP_MS / 1000 + 60)
    report = express.janitor.sweep_orphans()
    assert (report.examined, report.deleted, report.listed) == (2, 1, 6)
    assert lost not in keys_in(EXPRESS_BUCKET)
    assert len(bodies(express)) == 5


def test_a_sweep_stopped_at_its_bound_resumes_and_finds_every_orphan(
    express, clock, s3_clock, monkeypatch
):
    monkeypatch.setattr(janitor_module, "LIST_PAGE", 2)
    express.admin.create_topic("t", queues=1)
    for n in range(5):
        send(express, "t", b"m%d" % n)
    lost = [orphan(express, clock) for _ in range(4)]
    clock.advance(GRACE_S + 60)
    deleted = 0
    for _ in range(20):  # bounded runs, each from the position the last one saved
        report = express.janitor.sweep_orphans(max_objects=3)
        deleted += report.deleted
        if not report.unfinished:
            break
    assert deleted == 4 and not set(lost) & set(keys_in(EXPRESS_BUCKET))
    assert len(bodies(express)) == 5


def test_a_deleted_topic_is_purged_from_every_tier(express, clock, s3_clock):
    express.admin.create_topic("t", queues=2, retention_hours=72)
    send(express, "t", b"a", b"b")
    # an object of the name's earlier incarnation, kept 14 days: another tier
    earlier = express.objects.key_for("t", 1, clock.now, retention_hours=24 * 14)
    assert express.objects.put(earlier, b"not parquet", retention_hours=24 * 14)
    express.admin.create_topic("other", queues=1)
    send(express, "other", b"stays")
    tiers = {k.split("/")[0] for k in keys_in(EXPRESS_BUCKET) if "topic=t/" in k}
    assert tiers == {"retention_days=3", "retention_days=14"}
    express.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert express.janitor.purge_deleted_topics() == ["t"]
    assert [k for k in keys_in(EXPRESS_BUCKET) if "topic=t/" in k] == []
    assert bodies(express, "other") == [b"stays"]


def test_a_listing_position_s3_no_longer_takes_lists_its_tier_again(express, clock):
    express.admin.create_topic("t", queues=1)
    send(express, "t", b"a")
    send(express, "t", b"b")
    stale = "retention_days=3/\nexpress-token-from-long-ago"
    page, _, more = express.objects.list_page("topics/topic=t/", position=stale)
    assert len(page) == 2 and more  # the 3-day tier from its start, then the tiers after it


def test_an_idle_pass_lists_each_queue_once_in_its_topics_tier(express, clock, s3_clock):
    express.admin.create_topic("t", queues=2)
    send(express, "t", b"a")
    clock.advance(GRACE_S + OVERLAP_MS / 1000 + 60)
    assert express.janitor.sweep_orphans().examined == 1
    seen: Counter[str] = Counter()
    remove = observe_calls(lambda _service, operation, _params: seen.update([operation]))
    try:
        clock.advance(3600)
        assert express.janitor.sweep_orphans().examined == 0
    finally:
        remove()
    assert seen["ListObjectsV2"] == 2  # one per queue, not one per tier


def test_express_storage_without_its_own_bucket_is_refused(settings):
    with pytest.raises(ValueError, match="batch_bucket"):
        dataclasses.replace(settings, batch_storage="express")


def test_a_pass_whose_own_deletes_disturb_the_listing_still_finds_every_orphan(
    express, clock, s3_clock, monkeypatch
):
    """An unordered listing paged by continuation tokens may skip objects when the pass
    deletes some mid-listing; a pass never examines again what it skipped (its checkpoint
    moves past their write time), so a skipped orphan would stay until its tier expires."""
    monkeypatch.setattr(janitor_module, "LIST_PAGE", 2)
    monkeypatch.setattr(janitor_module, "DECIDE_BATCH", 1)  # deletes after every page
    express.admin.create_topic("t", queues=1)
    for n in range(4):
        send(express, "t", b"m%d" % n)
    lost = [orphan(express, clock) for _ in range(24)]
    clock.advance(GRACE_S + 60)
    deleted = express.janitor.sweep_orphans().deleted
    for _ in range(3):  # later passes: only what was written since their checkpoint
        clock.advance(3600)
        deleted += express.janitor.sweep_orphans().deleted
    assert not set(lost) & set(keys_in(EXPRESS_BUCKET))
    assert deleted == 24
    assert len(bodies(express)) == 4


def test_the_directory_buckets_lifecycle_rules_are_the_key_layouts_tiers():
    """One expiration rule per tier, by exactly the prefix a key of that tier starts with:
    a tier without its rule would keep its objects for ever, a prefix off by a character
    would expire nothing (or another tier's objects)."""
    from pathlib import Path

    from cirrusmq_broker.storage.batch_objects import (
        RETENTION_TIERS_DAYS,
        ExpressLayout,
        tier_prefix,
    )
    from cirrusmq_local.template import load_template

    root = Path(__file__).resolve().parents[3]
    bucket = load_template(root / "template.yaml").buckets["BatchDirectoryBucket"]
    rules = {
        rule["Prefix"]: rule["ExpirationInDays"]
        for rule in bucket.lifecycle_rules
        if rule.get("Status") == "Enabled"
    }
    assert rules == {tier_prefix(days): days for days in RETENTION_TIERS_DAYS}
    key = BatchObjectStore(None, "b", layout=ExpressLayout()).key_for("t", 0, 0, retention_hours=30)
    assert key.startswith(tier_prefix(2) + "topics/topic=t/")
