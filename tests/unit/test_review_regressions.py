"""Regressions found in review: inputs that broke a queue, contention, retention edges."""

from __future__ import annotations

import zlib

import boto3
import pytest
from broker_helpers import ack_statuses, send, statuses
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import IdempotencyConflict, InvalidMessage, InvalidTopicName
from cirrusmq_broker.model import ProducerStamp
from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS
from cirrusmq_broker.services.produce import MessageInput
from cirrusmq_broker.storage.appends import BatchAppender
from cirrusmq_broker.storage.groups import GroupStateStore


class SimulatedCrash(BaseException):
    pass


@pytest.mark.parametrize(
    "message",
    [
        MessageInput(b"x", born_timestamp=253_402_300_800_000),  # after year 9999
        MessageInput(b"x", tag="\ud800"),
        MessageInput(b"x", keys=("\udfff",)),
        MessageInput(b"x", properties={"k": "\ud800"}),
        MessageInput(b"x", message_group="\ud800"),
        MessageInput(b"x", message_id="abc\n"),
    ],
)
def test_unstorable_fields_are_refused(broker, message):
    broker.admin.create_topic("t", queues=1)
    with pytest.raises(InvalidMessage):
        broker.produce.send("t", [message])
    send(broker, "t", b"fine")
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"fine"]


def test_trailing_newline_is_not_a_valid_name(broker):
    with pytest.raises(InvalidTopicName):
        broker.admin.create_topic("x\n")


def test_a_contended_queue_is_skipped_not_failed(broker, monkeypatch):
    broker.admin.create_topic("t", queues=2)
    for queue in (0, 1):
        group = next(f"k{i}" for i in range(100) if zlib.crc32(f"k{i}".encode()) % 2 == queue)
        send(broker, "t", b"m", message_group=group)
    original = GroupStateStore.save
    monkeypatch.setattr(
        GroupStateStore,
        "save",
        lambda self, state, *args, **kw: state.queue != 1 and original(self, state, *args, **kw),
    )
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [m.message.queue for m in got] == [0]
    monkeypatch.undo()
    assert [m.message.queue for m in broker.consume.receive("g", "t", max_messages=10)] == [1]


def test_ack_of_many_leases_at_once(broker, clock):
    broker.admin.create_topic("t", queues=1)
    count = 50  # more leases than one condition expression could check
    for i in range(count):
        send(broker, "t", str(i).encode())
    got = [m for _ in range(count) for m in broker.consume.receive("g", "t", max_messages=1)]
    assert len({m.receipt_handle.split(".")[0] for m in got}) == count
    assert ack_statuses(broker, "g", [m.receipt_handle for m in got]) == ["acked"] * count
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (count, 0)


def test_index_entries_past_retention_are_not_delivered(broker, clock):
    broker.admin.create_topic("t", queues=1, retention_hours=1)
    send(broker, "t", b"old")
    clock.advance(3601)
    send(broker, "t", b"new")
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"new"]


def test_deleted_objects_are_skipped_and_their_leases_settle(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    send(broker, "t", b"b")
    first = broker.consume.receive("g", "t", invisible_seconds=10)
    assert [m.message.body for m in first] == [b"a", b"b"]
    s3 = boto3.client("s3", region_name="us-east-1")
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=broker.settings.bucket)["Contents"])
    fresh = Broker(broker.settings, clock)  # no decoded batches cached
    s3.delete_object(Bucket=broker.settings.bucket, Key=keys[0])
    s3.delete_object(Bucket=broker.settings.bucket, Key=keys[1])
    send(fresh, "t", b"c")
    clock.advance(11)
    got = fresh.consume.receive("g", "t", max_messages=10)
    assert [m.message.body for m in got] == [b"c"]
    fresh.consume.ack("g", [m.receipt_handle for m in got])
    # a leased message whose object is gone while its index item is retained is not past
    # retention: its lease stays until retention confirms it, then settles
    [status] = statuses(fresh, "g")
    assert (status.committed_offset, status.inflight) == (0, 2)
    clock.advance(73 * 3600)
    fresh.consume.receive("g", "t", max_messages=10)
    [status] = statuses(fresh, "g")
    assert (status.committed_offset, status.inflight) == (3, 0)


def test_lookup_never_answers_with_another_message(broker, clock):
    broker.admin.create_topic("t1")
    broker.admin.create_topic("t2")
    broker.produce.send("t1", [MessageInput(b"one", message_id="same")])
    broker.produce.send("t2", [MessageInput(b"two", message_id="same")])
    assert broker.lookup.lookup("t1", "same").body == b"one"
    assert broker.lookup.lookup("t2", "same").body == b"two"


def test_retry_with_another_payload_after_a_crash_stores_the_new_payload(broker, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    stamp = ProducerStamp("p", 3)
    with monkeypatch.context() as patch:
        patch.setattr(
            BatchAppender, "append", lambda *a, **k: (_ for _ in ()).throw(SimulatedCrash())
        )
        with pytest.raises(SimulatedCrash):
            broker.produce.send("t", [MessageInput(b"first")], stamp)
    broker.produce.send("t", [MessageInput(b"second"), MessageInput(b"third")], stamp)
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [m.message.body for m in got] == [b"second", b"third"]
    with pytest.raises(IdempotencyConflict):
        broker.produce.send("t", [MessageInput(b"first")], stamp)


def test_producer_elsewhere_continues_a_recreated_topic_after_the_old_offsets(settings, clock):
    producer, admin = Broker(settings, clock), Broker(settings, clock)
    admin.admin.create_topic("t", queues=1)
    assert [r.offset for r in send(producer, "t", b"a", b"b")] == [0, 1]
    admin.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    admin.janitor.purge_deleted_topics()
    clock.advance(1)
    admin.admin.create_topic("t", queues=1)
    producer.catalog.forget("t")  # its 30 s topic cache expired long before the purge
    assert [r.offset for r in send(producer, "t", b"c")] == [2]  # offsets never repeat
