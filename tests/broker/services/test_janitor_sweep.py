"""The incremental orphan sweep on in-process moto: checkpoints, bounds, the day prefixes.

moto stamps S3 LastModified with the FakeClock here (``s3_clock``), so object ages are
exact; ``s3_clock.lag_ms`` makes S3's clock disagree with the broker's.
"""

from __future__ import annotations

import importlib.util
import types
from collections import Counter
from pathlib import Path

import boto3
import pytest
from broker_helpers import index_items, object_keys, send
from cirrusmq_broker.errors import StorageUnavailable
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services import janitor as janitor_module
from cirrusmq_broker.services.janitor import OVERLAP_MS, PURGE_DELAY_SECONDS
from cirrusmq_broker.storage.appends import BatchAppender
from cirrusmq_broker.storage.batch_objects import object_key
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.log_index import LogIndex

GRACE_S = 300
APP = Path(__file__).resolve().parents[3] / "functions" / "janitor" / "app.py"


class SimulatedCrash(BaseException):
    pass


@pytest.fixture
def calls():
    """Counts of AWS operations made by the broker's clients while the test runs."""
    seen: Counter[str] = Counter()
    remove = observe_calls(lambda _service, operation, _params: seen.update([operation]))
    yield seen
    remove()


def orphan(broker, clock, topic: str = "t", queue: int = 0) -> str:
    """An object written now whose index put never happened."""
    key = object_key(topic, queue, clock.now)
    assert broker.objects.put(key, b"not parquet", retention_hours=72)
    return key


def crash_produce(broker, monkeypatch, topic: str = "t") -> None:
    """A produce that dies between its object write and its index append."""
    with monkeypatch.context() as patch:
        patch.setattr(
            BatchAppender, "append", lambda *a, **k: (_ for _ in ()).throw(SimulatedCrash())
        )
        with pytest.raises(SimulatedCrash):
            broker.produce.send(topic, [MessageInput(b"orphaned")])


def checkpoints(broker) -> dict[str, dict]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.queue_heads_table)["Items"]
    return {i["stream"]["S"]: i for i in items if i["stream"]["S"].endswith("#sweep")}


def bodies(broker, group: str = "g") -> list[bytes]:
    got = []
    while batch := broker.consume.receive("g", "t", max_messages=100):
        got += [m.message.body for m in batch]
        broker.consume.ack(group, [m.receipt_handle for m in batch])
    return sorted(got)


def test_old_orphans_go_young_and_indexed_objects_stay(broker, clock, s3_clock, monkeypatch):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"a")
    send(broker, "t", b"b")
    crash_produce(broker, monkeypatch)
    old = orphan(broker, clock, queue=1)
    clock.advance(GRACE_S - 30)
    young = orphan(broker, clock, queue=0)
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (0, 0)  # nothing old enough yet
    clock.advance(60)
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (4, 2)
    assert old not in object_keys(broker) and young in object_keys(broker)
    assert len(object_keys(broker)) == 3 and len(index_items(broker)) == 2
    assert bodies(broker) == [b"a", b"b"]
    clock.advance(GRACE_S)
    assert broker.janitor.sweep_orphans().deleted == 1  # the young one, now old
    assert len(object_keys(broker)) == 2


def test_a_run_examines_only_what_was_written_since_the_last(broker, clock, s3_clock, calls):
    broker.admin.create_topic("t", queues=2)
    for n in range(6):
        send(broker, "t", b"m%d" % n)
    clock.advance(GRACE_S + OVERLAP_MS / 1000 + 60)  # past the overlap of the next run
    assert broker.janitor.sweep_orphans().examined == 6
    clock.advance(3600)  # the next scheduled run: nothing new
    calls.clear()
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (0, 0)
    assert calls["ListObjectsV2"] == 2 and calls["Query"] == 0  # one listing per queue
    assert calls["PutItem"] == 0  # an idle queue's checkpoint is rewritten once a day at most

    send(broker, "t", b"new-1")
    send(broker, "t", b"new-2")
    lost = orphan(broker, clock, queue=1)
    clock.advance(GRACE_S + OVERLAP_MS / 1000 + 60)
    calls.clear()
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (3, 1)
    assert lost not in object_keys(broker)
    # queue 0: one window query; queue 1: one window query + its key's whole day (the orphan)
    assert calls["ListObjectsV2"] == 2 and calls["Query"] == 3
    assert calls["DeleteObjects"] == 1
    assert len(bodies(broker)) == 8


def test_the_overlap_looks_again_only_just_behind_the_checkpoint(broker, clock, s3_clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    clock.advance(GRACE_S + 1)  # the checkpoint lands 1 s after the object
    assert broker.janitor.sweep_orphans().examined == 1
    clock.advance(OVERLAP_MS / 1000)
    assert broker.janitor.sweep_orphans().examined == 1  # within the overlap: again
    clock.advance(OVERLAP_MS / 1000)
    assert broker.janitor.sweep_orphans().examined == 0


def test_a_run_stops_at_its_object_bound_and_the_next_resumes(broker, clock, s3_clock, monkeypatch):
    monkeypatch.setattr(janitor_module, "LIST_PAGE", 3)  # several pages, stops mid-page
    broker.admin.create_topic("t", queues=2)
    lost = [orphan(broker, clock, queue=q % 2) for q in range(7)]
    for n in range(5):
        send(broker, "t", b"m%d" % n)
    clock.advance(GRACE_S + OVERLAP_MS / 1000 + 60)
    reports = []
    while not reports or reports[-1].unfinished:
        reports.append(broker.janitor.sweep_orphans(max_objects=4))
        assert reports[-1].examined <= 4
        assert len(reports) < 10
    assert sum(r.examined for r in reports) == 12  # each object examined exactly once
    assert sum(r.deleted for r in reports) == 7
    assert not set(lost) & set(object_keys(broker))
    assert len(bodies(broker)) == 5
    clock.advance(3600)
    assert broker.janitor.sweep_orphans().examined == 0


def test_a_run_stops_when_its_time_is_up_and_the_next_resumes(broker, clock, s3_clock, monkeypatch):
    monkeypatch.setattr(janitor_module, "LIST_PAGE", 2)
    broker.admin.create_topic("t", queues=1)
    for _ in range(5):
        orphan(broker, clock)
    clock.advance(GRACE_S + 60)
    ticks = iter([1.0, 1.0, 0.0])  # time for two listing pages in the first run

    first = broker.janitor.sweep_orphans(time_left=lambda: next(ticks, 0.0))
    assert (first.examined, first.deleted, first.unfinished) == (4, 4, 1)
    second = broker.janitor.sweep_orphans()
    assert (second.examined, second.deleted, second.unfinished) == (1, 1, 0)
    assert object_keys(broker) == []


def test_queues_visited_longest_ago_go_first(broker, clock, s3_clock):
    broker.admin.create_topic("t", queues=2)
    for _ in range(3):
        orphan(broker, clock, queue=0)
        orphan(broker, clock, queue=1)
    clock.advance(GRACE_S + 60)
    assert broker.janitor.sweep_orphans(max_objects=3).deleted == 3  # queue 0 only
    clock.advance(60)
    assert broker.janitor.sweep_orphans(max_objects=3).deleted == 3  # then queue 1
    assert object_keys(broker) == []


def test_an_orphan_of_an_earlier_day_is_found_once(broker, clock, s3_clock, monkeypatch):
    midnight = (clock.now // 86_400_000 + 1) * 86_400_000
    clock.now = midnight - 600_000
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"kept")
    clock.now = midnight - 30_000
    crash_produce(broker, monkeypatch)  # written 30 s before midnight: yesterday's dt=
    [yesterdays] = [k for k in object_keys(broker) if k not in _indexed_keys(broker)]
    clock.now = midnight + 60_000
    assert broker.janitor.sweep_orphans().deleted == 0  # 90 s old: a produce may be in flight
    clock.advance(2 * 86_400)  # the janitor did not run for days (retention: 3)
    send(broker, "t", b"today")
    clock.advance(GRACE_S + 60)
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (2, 1)
    assert yesterdays not in object_keys(broker)
    clock.advance(3600)
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (1, 0)  # "today", in the overlap; nothing else
    assert bodies(broker) == [b"kept", b"today"]


def test_an_indexed_object_is_kept_however_far_s3s_clock_is_off(broker, clock, s3_clock):
    midnight = (clock.now // 86_400_000 + 1) * 86_400_000
    clock.now = midnight - 3 * 3600_000
    broker.admin.create_topic("t", queues=1)
    s3_clock.lag_ms = 2 * 3600_000  # S3 stamps the object 2 h after the index's time
    send(broker, "t", b"same day")
    s3_clock.lag_ms = 4 * 3600_000  # ... and this one on the next UTC day
    send(broker, "t", b"next day")
    s3_clock.lag_ms = 0
    clock.advance(6 * 3600 + GRACE_S)
    report = broker.janitor.sweep_orphans()
    assert (report.examined, report.deleted) == (2, 0)
    assert bodies(broker) == [b"next day", b"same day"]


def test_a_failed_index_read_keeps_the_objects_and_the_checkpoint(
    broker, clock, s3_clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    lost = orphan(broker, clock)
    clock.advance(GRACE_S + 60)

    def unavailable(*_args, **_kwargs):
        raise StorageUnavailable("storage is unavailable")

    with monkeypatch.context() as patch:
        patch.setattr(LogIndex, "keys_stored_between", unavailable)
        report = broker.janitor.sweep_orphans()
    assert (report.deleted, report.failed) == (0, 1)
    assert lost in object_keys(broker) and checkpoints(broker) == {}
    assert broker.janitor.sweep_orphans().deleted == 1


def test_a_topic_created_again_is_swept_from_scratch(broker, clock, s3_clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    clock.advance(GRACE_S + 60)
    broker.janitor.sweep_orphans()
    assert list(checkpoints(broker)) == ["t#0#sweep"]
    broker.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics() == ["t"]
    assert checkpoints(broker) == {}  # purged with the topic's heads
    broker.admin.create_topic("t", queues=1)
    lost = orphan(broker, clock)
    clock.advance(GRACE_S + 60)
    assert broker.janitor.sweep_orphans().deleted == 1
    assert lost not in object_keys(broker)


def test_a_purge_out_of_time_goes_on_in_the_next_run(broker, clock, s3_clock, monkeypatch):
    monkeypatch.setattr(janitor_module, "PURGE_PAGE", 2)
    broker.admin.create_topic("t", queues=1)
    for n in range(5):
        send(broker, "t", b"m%d" % n)
    broker.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics(time_left=lambda: 0.0) == []
    assert len(index_items(broker)) == 3  # one page of entries went
    assert broker.janitor.purge_deleted_topics() == ["t"]
    assert object_keys(broker) == [] and index_items(broker) == []
    assert broker.topic_store.get("t") is None


def test_the_handler_bounds_a_run_by_the_invocation_time(broker, clock, s3_clock, monkeypatch):
    spec = importlib.util.spec_from_file_location("janitor_app_under_test", APP)
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    monkeypatch.setattr(app, "current_broker", lambda: broker)
    monkeypatch.setenv("CIRRUSMQ_SWEEP_MAX_OBJECTS", "2")
    broker.admin.create_topic("t", queues=1)
    for _ in range(3):
        orphan(broker, clock)
    clock.advance(GRACE_S + 60)
    plenty = types.SimpleNamespace(get_remaining_time_in_millis=lambda: 300_000)
    first = app.lambda_handler({"task": "sweep_orphans"}, plenty)
    assert (first["examined"], first["deleted"], first["unfinished"]) == (2, 2, 1)
    no_time = types.SimpleNamespace(get_remaining_time_in_millis=lambda: 30_000)
    assert app.lambda_handler({"task": "sweep_orphans"}, no_time)["examined"] == 0
    assert app.lambda_handler({"task": "sweep_orphans"}, plenty)["deleted"] == 1
    assert app.lambda_handler({"task": "purge_deleted_topics"}, plenty) == {"purged": []}


def _indexed_keys(broker) -> set[str]:
    return {item["object_key"]["S"] for item in index_items(broker)}
