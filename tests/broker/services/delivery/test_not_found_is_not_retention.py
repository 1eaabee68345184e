"""A leased message not found is settled without a delivery only when it is past retention:
a consistent index read finds no retained batch holding it and the retention edge is above
it. A read that missed a batch appended a moment ago, or an object missing behind a live
index item, settles nothing (the message would be lost)."""

from __future__ import annotations

import time

import boto3
from broker_helpers import (
    create_fifo_topic,
    lagging_index_reads,
    send,
    statuses,
)
from cirrusmq.spark.options import StackOptions
from cirrusmq.spark.planning import QueueLog
from cirrusmq_broker.container import Broker
from cirrusmq_broker.storage.clients import aws_client
from cirrusmq_broker.storage.log_index import LogIndex


def retry_count(broker) -> int:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.log_index_table)["Items"]
    return sum(int(i["count"]["N"]) for i in items if i["stream"]["S"].startswith("retry."))


def third_of_two_batches(broker, *, fifo: bool = False, **receive):
    """Offsets 0 | 1 2 in two batches; 0 and 1 acked, 2 leased on its own."""
    if fifo:
        create_fifo_topic(broker, "t")
    else:
        broker.admin.create_topic("t", queues=1)
    fields = {"message_group": "k"} if fifo else {}
    send(broker, "t", b"a", **fields)
    send(broker, "t", b"b", b"c", **fields)
    for _ in range(2):
        [m] = broker.consume.receive("g", "t", max_messages=1)
        broker.consume.ack("g", [m.receipt_handle])
    [c] = broker.consume.receive("g", "t", max_messages=1, **receive)
    assert (c.message.body, c.message.offset) == (b"c", 2)
    return c


def lagging(broker):
    """Eventual reads miss the batch of b and c (base offset 1)."""
    client = aws_client("dynamodb", broker.settings)
    return lagging_index_reads(client, broker.settings.log_index_table, {("t#0", 1)})


def test_a_nack_of_a_message_an_eventual_read_would_miss_moves_it(broker, clock):
    c = third_of_two_batches(broker)
    with lagging(broker):
        assert [o.status for o in broker.retries.nack("g", [c.receipt_handle])] == ["acked"]
    assert retry_count(broker) == 1
    clock.advance(10)
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"c"]


def test_an_expiry_of_a_message_an_eventual_read_would_miss_moves_it(broker, clock):
    third_of_two_batches(broker, invisible_seconds=10)
    clock.advance(10)
    with lagging(broker):
        assert broker.consume.receive("g", "t") == []
    assert retry_count(broker) == 1
    clock.advance(10)
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"c"]


def test_an_in_place_redelivery_an_eventual_read_would_miss_delivers_it(broker, clock):
    third_of_two_batches(broker, fifo=True, invisible_seconds=10)  # redelivered in place
    clock.advance(10)
    with lagging(broker):
        again = broker.consume.receive("g", "t")
    assert [(m.message.body, m.delivery_attempt) for m in again] == [(b"c", 2)]


def test_a_message_whose_object_is_missing_is_settled_only_past_retention(broker, clock):
    c = third_of_two_batches(broker, invisible_seconds=10)
    s3 = boto3.client("s3", region_name="us-east-1")
    entry = broker.index.entry_at("t", 0, c.message.offset)
    s3.delete_object(Bucket=broker.settings.bucket, Key=entry.object_key)
    other = Broker(broker.settings, clock)  # another container: nothing cached
    clock.advance(10)
    assert other.consume.receive("g", "t") == []
    assert retry_count(broker) == 0
    [status] = [s for s in broker.consume.describe_group("g").queues if s.topic == "t"]
    assert status.inflight == 1  # kept: its index item is retained, so it is not past retention
    clock.advance(73 * 3600)  # the topic's 72 h retention ended
    other.consume.receive("g", "t")
    [status] = [s for s in broker.consume.describe_group("g").queues if s.topic == "t"]
    assert (status.inflight, status.committed_offset) == (0, 3)
    assert retry_count(broker) == 0


def test_spark_planning_finds_the_batch_holding_the_start_an_eventual_read_would_miss(
    broker, clock
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    send(broker, "t", b"b", b"c")
    settings = broker.settings
    stack = StackOptions(
        bucket=settings.bucket,
        log_index_table=settings.log_index_table,
        queue_heads_table=settings.queue_heads_table,
        topics_table=settings.topics_table,
        region="us-east-1",
        clock_offset_ms=clock() - int(time.time() * 1000),
    )
    log = QueueLog(stack, "t")
    client = boto3.client("dynamodb", region_name="us-east-1")
    log.index = LogIndex(client, settings.log_index_table)
    with lagging_index_reads(client, settings.log_index_table, {("t#0", 1)}):
        slices = log.slices(0, 2, 3)  # a micro-batch starting mid-batch
    assert [(s.base_offset, s.first, s.end) for s in slices] == [(1, 2, 3)]


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
