"""Message trace events in Spark: the ``cirrusmq`` data source's ``trace`` option and a
native Parquet read of the ``trace/`` prefix."""

from __future__ import annotations

from cirrusmq import Message, SimpleConsumer
from spark_helpers import mirror


def traced_round_trip(cirrusmq_stack, admin, producer, topic: str) -> list[str]:  # noqa: ANN001
    """Three messages of a traced topic sent, received and acked."""
    admin.create_topic(topic, queues=1, trace=True)
    ids = [producer.send(Message(topic, f"m{i}".encode())).message_id for i in range(3)]
    stack = cirrusmq_stack
    with SimpleConsumer(stack.endpoint, stack.credentials, "g", [topic], await_duration=2) as c:
        received = []
        while len(received) < 3:
            received += c.receive(10, 30)
        c.ack_batch(received)
    return ids


def test_the_data_source_reads_trace_events(spark, cirrusmq_stack, admin, producer, topic_name):  # noqa: ANN001
    ids = traced_round_trip(cirrusmq_stack, admin, producer, topic_name)
    df = (
        spark.read.format("cirrusmq")
        .options(**cirrusmq_stack.spark_options())
        .option("trace", "true")
        .option("topic", topic_name)
        .load()
    )
    rows = df.collect()
    assert {r.topic for r in rows} == {topic_name}
    sent = {r.message_id for r in rows if r.kind == "sent"}
    delivered = {r.message_id for r in rows if r.kind == "delivered"}
    assert sent == delivered == set(ids)
    assert sum(r.kind == "acked" for r in rows) == 3  # acks name the lease's place
    assert all(r.group == "g" for r in rows if r.kind in ("delivered", "acked"))


def test_spark_reads_the_trace_prefix_natively(
    spark,
    cirrusmq_stack,
    admin,
    producer,
    topic_name,
    tmp_path,  # noqa: ANN001
):
    ids = traced_round_trip(cirrusmq_stack, admin, producer, topic_name)
    files = mirror(cirrusmq_stack, "trace/", tmp_path)
    assert files
    df = spark.read.parquet(str(tmp_path / "trace"))
    assert {"dt", "hour", "kind", "time", "message_id"} <= set(df.columns)
    mine = df.where(df.topic == topic_name)
    kinds = {r.kind for r in mine.collect()}
    assert kinds == {"sent", "delivered", "acked"}
    assert {r.message_id for r in mine.where(mine.kind == "sent").collect()} == set(ids)
