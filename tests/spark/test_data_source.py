"""The ``cirrusmq`` data source against the local stack, read by a real local[2] Spark."""

from __future__ import annotations

import json
import os

import pytest
from cirrusmq.spark import register
from cirrusmq.spark.source import CirrusMQDataSource
from pyspark.errors import PySparkException
from spark_helpers import drain, load, send_batches


def _view(m) -> tuple:
    return (m.message_id, m.queue, m.offset, m.body, m.tag, tuple(m.keys), dict(m.properties))


def _row(r) -> tuple:
    return (r.message_id, r.queue, r.offset, r.body, r.tag, tuple(r["keys"]), dict(r.properties))


def _objects_per_queue(listed) -> dict[str, int]:
    counts: dict[str, int] = {}
    for obj in listed["Contents"]:
        queue = obj["Key"].split("/")[2]
        counts[queue] = counts.get(queue, 0) + 1
    return counts


def test_batch_read_equals_what_consumers_received(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    admin.create_topic(topic_name, queues=3)
    send_batches(producer, topic_name, batches=3, per_batch=12, queues=3)
    received = drain(cirrusmq_stack, "g-spark", topic_name, 36)
    assert len(received) == 36

    df = load(spark, cirrusmq_stack, topic_name, objectsPerPartition="1")
    rows = df.collect()
    assert sorted(map(_row, rows)) == sorted(map(_view, received))
    assert {r.topic for r in rows} == {topic_name}
    by_id = {m.message_id: m for m in received}
    for r in rows:  # timestamps as the broker stored them (ms precision)
        m = by_id[r.message_id]
        assert int(r.stored_timestamp.timestamp() * 1000) == m.stored_timestamp
        assert int(r.born_timestamp.timestamp() * 1000) == m.born_timestamp
        assert r.reconsume_count == 0 and r.origin_topic is None and r.producer_id
    # one input partition per batch object (objectsPerPartition=1), else groups of them
    s3 = cirrusmq_stack.boto3_client("s3")
    listed = s3.list_objects_v2(
        Bucket=cirrusmq_stack.resources["MessageBucket"], Prefix=f"topics/topic={topic_name}/"
    )
    assert _objects_per_queue(listed) == {f"queue={q}": 3 for q in range(3)}
    assert df.rdd.getNumPartitions() == 9
    grouped = load(spark, cirrusmq_stack, topic_name, objectsPerPartition="2")
    assert grouped.rdd.getNumPartitions() == 6  # per queue: 2 objects, then 1


def test_a_read_is_packed_over_the_sessions_cores_across_queues(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    admin.create_topic(topic_name, queues=3)
    send_batches(producer, topic_name, batches=3, per_batch=12, queues=3)  # 9 small objects
    one_each = sorted(
        map(_row, load(spark, cirrusmq_stack, topic_name, objectsPerPartition="1").collect())
    )
    assert len(one_each) == 36

    packed = load(spark, cirrusmq_stack, topic_name)
    # register(spark) made the session's parallelism (local[2]) the default minPartitions
    assert spark.sparkContext.defaultParallelism == 2
    assert packed.rdd.getNumPartitions() == 2
    assert sorted(map(_row, packed.collect())) == one_each
    # a read's own option wins, whatever its case
    assert load(spark, cirrusmq_stack, topic_name, minpartitions="5").rdd.getNumPartitions() == 5
    single = load(spark, cirrusmq_stack, topic_name, minPartitions="1")
    assert single.rdd.getNumPartitions() == 1
    assert sorted(map(_row, single.collect())) == one_each


def test_the_plain_class_registered_splits_over_the_planning_machines_cores(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    admin.create_topic(topic_name, queues=3)
    send_batches(producer, topic_name, batches=3, per_batch=12, queues=3)  # 9 small objects
    spark.dataSource.register(CirrusMQDataSource)  # as PySpark's docs register a source
    try:
        tasks = load(spark, cirrusmq_stack, topic_name).rdd.getNumPartitions()
    finally:
        register(spark)
    assert tasks == min(9, os.cpu_count() or 1)


def test_offset_options_follow_kafka_semantics(spark, cirrusmq_stack, admin, producer, topic_name):
    admin.create_topic(topic_name, queues=2)
    send_batches(
        producer, topic_name, batches=2, per_batch=10, queues=2
    )  # 10 per queue, 2 objects each
    ends = {q.queue: q.max_offset for q in admin.describe_topic(topic_name).queue_offsets}
    assert ends == {0: 10, 1: 10}

    def offsets(**options):
        return sorted(
            (r.queue, r.offset)
            for r in load(spark, cirrusmq_stack, topic_name, **options)
            .select("queue", "offset")
            .collect()
        )

    assert len(offsets()) == 20
    assert len(offsets(startingOffsets="latest")) == 0
    # mid-batch starts and ends cut objects; -2 earliest, -1 latest; queues left out: defaults
    got = offsets(
        startingOffsets=json.dumps({topic_name: {"0": 3, "1": -2}}),
        endingOffsets=json.dumps({"0": 7, "1": -1}),
    )
    assert got == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]
    assert offsets(startingOffsets='{"1": 8}') == [(0, o) for o in range(10)] + [(1, 8), (1, 9)]
    with pytest.raises(PySparkException, match="no queue 5"):
        offsets(startingOffsets='{"5": 0}')
    with pytest.raises(PySparkException, match="startingOffsets"):
        offsets(startingOffsets="yesterday")


def test_starting_and_ending_timestamps_pick_batches_by_store_time(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=4)
    cirrusmq_stack.advance_time(60)
    send_batches(producer, topic_name, batches=1, per_batch=4)
    cirrusmq_stack.advance_time(60)
    send_batches(producer, topic_name, batches=1, per_batch=4)
    stored = sorted({r.stored_timestamp for r in load(spark, cirrusmq_stack, topic_name).collect()})
    assert len(stored) == 3
    second = int(stored[1].timestamp() * 1000)

    def offsets(**options):
        rows = load(spark, cirrusmq_stack, topic_name, **options).select("offset").collect()
        return sorted(r.offset for r in rows)

    assert offsets(startingTimestamp=str(second)) == list(range(4, 12))
    assert offsets(startingTimestamp=str(second + 1)) == list(range(8, 12))
    assert offsets(endingTimestamp=str(second)) == list(range(0, 8))
    assert offsets(startingTimestamp=str(second), endingTimestamp=str(second)) == [4, 5, 6, 7]
    assert offsets(startingTimestamp=str(2**50)) == []


def test_expired_batches_are_skipped_before_ttl_deletes_them(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    admin.create_topic(topic_name, queues=1, retention_hours=1)
    send_batches(producer, topic_name, batches=2, per_batch=3)
    assert load(spark, cirrusmq_stack, topic_name).count() == 6
    # two hours later by the reader's clock; the items are still there (no TTL pass ran)
    later = {"clockOffsetMs": str(int(cirrusmq_stack.spark_options()["clockOffsetMs"]) + 7_200_000)}
    assert load(spark, cirrusmq_stack, topic_name, **later).count() == 0


def test_orphans_and_staged_prefixes_are_never_read(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=5)
    s3 = cirrusmq_stack.boto3_client("s3")
    bucket = cirrusmq_stack.resources["MessageBucket"]
    key = s3.list_objects_v2(Bucket=bucket, Prefix=f"topics/topic={topic_name}/")["Contents"][0][
        "Key"
    ]
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    # an orphan (a produce whose index put never happened) and staged copies outside topics/
    s3.put_object(Bucket=bucket, Key=key.replace(".parquet", "-orphan.parquet"), Body=data)
    s3.put_object(Bucket=bucket, Key=f"timers/{topic_name}/x.parquet", Body=data)
    s3.put_object(Bucket=bucket, Key=f"half/{topic_name}/x.parquet", Body=data)
    rows = load(spark, cirrusmq_stack, topic_name).collect()
    assert sorted(r.offset for r in rows) == [0, 1, 2, 3, 4]
    # without the topics table (an internal topic is not in it) the queues come from the heads
    rows = load(spark, cirrusmq_stack, topic_name, topicsTable="").select("offset").collect()
    assert sorted(r.offset for r in rows) == [0, 1, 2, 3, 4]


def test_bad_options_are_refused(spark, cirrusmq_stack):
    with pytest.raises(PySparkException, match="topic"):
        spark.read.format("cirrusmq").options(**cirrusmq_stack.spark_options()).load().count()
    with pytest.raises(PySparkException, match="bucket"):
        spark.read.format("cirrusmq").option("topic", "x").load().count()


def test_fetch_threads_change_nothing_in_what_is_read(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    """One GET at a time or several in flight per task: the same rows, each offset once."""
    admin.create_topic(topic_name, queues=2)
    send_batches(producer, topic_name, batches=4, per_batch=6, queues=2)
    one = load(spark, cirrusmq_stack, topic_name, fetchThreads="1").collect()
    many = load(spark, cirrusmq_stack, topic_name, fetchThreads="8").collect()
    assert len(one) == 24
    assert sorted(map(tuple, many)) == sorted(map(tuple, one))
    assert len({(r.queue, r.offset) for r in many}) == 24
