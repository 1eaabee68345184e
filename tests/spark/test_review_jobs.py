"""Regressions from the review of the export / replay jobs."""

from __future__ import annotations

import json

import pytest
from cirrusmq.spark.jobs import export as export_job
from cirrusmq.spark.jobs.replay import chunks, ordered, read_dataset
from spark_helpers import send_batches


def test_an_export_re_run_after_a_crash_finishes_that_run_even_when_the_log_moved(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path, monkeypatch
):
    options = cirrusmq_stack.spark_options()
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=4, queues=1)
    out = str(tmp_path / "export")
    real_publish = export_job._publish  # noqa: SLF001

    def crash_after_moving(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        real_publish(*args, **kwargs)
        raise RuntimeError("crash before the offsets are recorded")

    monkeypatch.setattr(export_job, "_publish", crash_after_moving)
    with pytest.raises(RuntimeError):
        export_job.export(spark, options, topic_name, out)
    monkeypatch.setattr(export_job, "_publish", real_publish)

    send_batches(producer, topic_name, batches=1, per_batch=3, queues=1)  # the log moved on
    again = export_job.export(spark, options, topic_name, out)
    assert again.ranges == {0: [(0, 7)]} and again.messages == 7
    offsets = sorted(r.offset for r in spark.read.parquet(out).select("offset").collect())
    assert offsets == list(range(7))  # each exactly once
    manifest = json.loads((tmp_path / "export" / export_job.MANIFEST).read_text())
    assert manifest == {topic_name: {"0": [[0, 7]]}}


def test_tags_that_look_like_numbers_or_dates_replay_as_written(spark, tmp_path):
    out = str(tmp_path / "export")
    rows = [(f"m{i}", bytearray(b"x"), tag, "2026-11-23") for i, tag in enumerate(["007", "010"])]
    rows.append(("m2", bytearray(b"x"), "2024-01-01", "2026-11-23"))
    frame = spark.createDataFrame(rows, "message_id string, body binary, tag string, dt string")
    frame.write.partitionBy("dt", "tag").parquet(out)
    back = read_dataset(spark, out)
    assert back.schema["tag"].dataType.simpleString() == "string"
    wire = [m for chunk in chunks(ordered(back).toLocalIterator(), 100) for m in chunk]
    assert sorted(m["tag"] for m in wire) == ["007", "010", "2024-01-01"]
