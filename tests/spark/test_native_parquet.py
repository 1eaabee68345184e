"""Spark's own Parquet reader on a local mirror of the ``topics/`` prefix (Hive layout)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from spark_helpers import mirror, send_batches


def test_spark_reads_the_mirrored_prefix_with_partition_columns(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path
):
    admin.create_topic(topic_name, queues=2)
    receipts = send_batches(producer, topic_name, batches=2, per_batch=4, queues=2)
    files = mirror(cirrusmq_stack, f"topics/topic={topic_name}/", tmp_path)
    assert len(files) == 4
    # a version 1 object (before the broker-written columns) next to version 2 ones
    v2 = pq.read_table(files[0])
    v1 = v2.select([n for n in v2.column_names if n not in _V2_ONLY]).replace_schema_metadata(
        {"cirrusmq.schema_version": "1"}
    )
    v1 = v1.set_column(0, "message_id", pa.array([f"v1-{i}" for i in range(v1.num_rows)]))
    pq.write_table(v1, files[0].with_name("v1-object.parquet"), compression="zstd")

    df = spark.read.option("mergeSchema", "true").parquet(str(tmp_path / "topics"))
    assert {"topic", "queue", "dt", *_V2_ONLY} <= set(df.columns)
    rows = df.where(df.topic == topic_name).collect()
    assert len(rows) == 8 + v1.num_rows
    assert {r.message_id for r in rows} >= {r.message_id for r in receipts}
    assert {r.queue for r in rows} == {0, 1} and len({r.dt for r in rows}) == 1
    old = [r for r in rows if r.message_id.startswith("v1-")]
    assert old and all(r.reconsume_count is None and r.origin_topic is None for r in old)


_V2_ONLY = (
    "delivery_timestamp",
    "origin_topic",
    "origin_queue",
    "origin_offset",
    "reconsume_count",
    "dead_letter_reason",
    "transaction_id",
)
