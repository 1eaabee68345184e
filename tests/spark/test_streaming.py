"""Streaming reads: checkpointed offsets per queue, maxOffsetsPerTrigger, availableNow."""

from __future__ import annotations

from spark_helpers import send_batches


def _run(spark, stack, topic, checkpoint, **options) -> list[list[tuple[int, int]]]:
    """One availableNow run of a query on ``checkpoint``; the (queue, offset)s of each
    micro-batch it processed."""
    batches: list[list[tuple[int, int]]] = []

    def collect(frame, batch_id: int) -> None:
        batches.append(
            sorted((r.queue, r.offset) for r in frame.select("queue", "offset").collect())
        )

    stream = (
        spark.readStream.format("cirrusmq")
        .options(**stack.spark_options())
        .option("topic", topic)
        .options(**options)
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    return [b for b in batches if b]


def test_restarted_query_reads_only_new_batches(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path
):
    admin.create_topic(topic_name, queues=2)
    send_batches(producer, topic_name, batches=2, per_batch=6, queues=2)  # 6 per queue
    checkpoint = tmp_path / "checkpoint"

    first = _run(
        spark,
        cirrusmq_stack,
        topic_name,
        checkpoint,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="5",
    )
    assert sorted(o for b in first for o in b) == [(q, o) for q in (0, 1) for o in range(6)]
    assert all(len(b) <= 5 for b in first) and len(first) == 3  # 12 offsets, <= 5 a trigger

    send_batches(producer, topic_name, batches=1, per_batch=4, queues=2)  # offsets 6, 7 each
    again = _run(spark, cirrusmq_stack, topic_name, checkpoint, startingOffsets="earliest")
    assert again == [[(0, 6), (0, 7), (1, 6), (1, 7)]]  # neither skipped nor repeated


def test_new_query_starts_at_latest_by_default(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path
):
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=3)
    assert _run(spark, cirrusmq_stack, topic_name, tmp_path / "checkpoint") == []


def test_a_checkpoint_reads_a_recreated_topic_from_its_first_message(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path
):
    """A stream checkpointed on a topic that is then deleted and created again reads every
    message of the new topic (none is skipped below the old positions)."""
    from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS

    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=3)
    checkpoint = tmp_path / "checkpoint"
    first = _run(spark, cirrusmq_stack, topic_name, checkpoint, startingOffsets="earliest")
    assert sum(len(b) for b in first) == 3
    admin.delete_topic(topic_name)
    cirrusmq_stack.advance_time(PURGE_DELAY_SECONDS + 1)
    cirrusmq_stack.run_schedule("JanitorFunction", "PurgeDeletedTopics")
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=5)
    again = _run(spark, cirrusmq_stack, topic_name, checkpoint, startingOffsets="earliest")
    assert sum(len(b) for b in again) == 5, again
