"""The data pipeline jobs round-trip: export → replay → read, stats with group lag."""

from __future__ import annotations

import json

import pytest
from cirrusmq import SimpleConsumer
from cirrusmq.spark.jobs import export as export_job
from cirrusmq.spark.jobs.export import MANIFEST, export, merge, subtract
from cirrusmq.spark.jobs.replay import chunks, ordered, read_dataset, replay
from cirrusmq.spark.jobs.stats import group_lags, stats
from spark_helpers import drain, load, send_batches


def _tag(batch: int, i: int) -> str | None:
    return None if i == 0 else ("a" if i % 2 else "b")


def test_export_replay_round_trip_is_idempotent(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path
):
    options = cirrusmq_stack.spark_options()
    admin.create_topic(topic_name, queues=2)
    send_batches(producer, topic_name, batches=2, per_batch=6, queues=2, tag_of=_tag)
    out = str(tmp_path / "export")

    first = export(spark, options, topic_name, out)
    assert first.messages == 12 and first.ranges == {0: [(0, 6)], 1: [(0, 6)]}
    dataset = spark.read.parquet(out).select("tag", "dt").collect()
    assert len(dataset) == 12 and len({r.dt for r in dataset}) == 1
    assert {r.tag for r in dataset} == {None, "a", "b"}
    assert export(spark, options, topic_name, out).run is None  # a re-run: nothing new
    manifest_path = tmp_path / "export" / MANIFEST
    before_second = manifest_path.read_text()

    send_batches(producer, topic_name, batches=1, per_batch=4, queues=2, tag_of=_tag)
    second = export(spark, options, topic_name, out)  # incremental: the new offsets only
    assert second.messages == 4 and second.ranges == {0: [(6, 8)], 1: [(6, 8)]}
    # a crash after the files moved but before the offsets were recorded: the re-run is the
    # same run, replaces its files, and records them
    manifest_path.write_text(before_second)
    assert export(spark, options, topic_name, out).run == second.run
    assert spark.read.parquet(out).count() == 16
    manifest = json.loads((tmp_path / "export" / MANIFEST).read_text())
    assert manifest[topic_name] == {"0": [[0, 8]], "1": [[0, 8]]}

    target = topic_name + "-replayed"
    admin.create_topic(target, queues=2)
    replayed = replay(
        spark,
        out,
        target,
        endpoint=cirrusmq_stack.endpoint,
        credentials=cirrusmq_stack.credentials,
        rate=1000,
        batch_size=5,
    )
    assert (replayed.messages, replayed.requests, replayed.already_stored) == (16, 4, 0)
    again = replay(
        spark,
        out,
        target,
        endpoint=cirrusmq_stack.endpoint,
        credentials=cirrusmq_stack.credentials,
        batch_size=5,
    )
    assert again.already_stored == 16  # the same stamps: stored nothing twice
    original = load(spark, cirrusmq_stack, topic_name).collect()
    copied = load(spark, cirrusmq_stack, target).collect()
    assert sorted(
        (r.message_id, r.body, r.tag, tuple(r["keys"]), dict(r.properties)) for r in copied
    ) == sorted(
        (r.message_id, r.body, r.tag, tuple(r["keys"]), dict(r.properties)) for r in original
    )


def test_stats_count_messages_bytes_and_group_lag(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    options = cirrusmq_stack.spark_options()
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=6, tag_of=_tag)  # None a b a b a
    drain(cirrusmq_stack, "g-stats", topic_name, 6)
    send_batches(producer, topic_name, batches=1, per_batch=4, tag_of=_tag)

    frames = stats(spark, options, [topic_name], groups=["g-stats", "g-none"])
    by_tag = {r.tag: (r.messages, r.bytes) for r in frames["messages"].collect()}
    size = len(b"body-0-0")
    assert by_tag == {None: (2, 2 * size), "a": (5, 5 * size), "b": (3, 3 * size)}
    lag = [
        (r.group, r.queue, r.committed_offset, r.max_offset, r.lag)
        for r in frames["group_lag"].collect()
    ]
    assert lag == [("g-stats", 0, 6, 10, 4)]
    assert [r.unsettled for r in frames["backlog"].collect()] == [4]


def test_group_lag_counts_the_groups_retry_topic(
    spark, cirrusmq_stack, admin, producer, topic_name
):
    """A nacked message waits in the group's retry topic (which the group has not read yet):
    the lag table has its row, as describe_group and the Lag metric count it."""
    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=2)
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, "g-retry", [topic_name], 1) as consumer:
        first, second = consumer.receive(2, 60)
        consumer.ack(first)
        consumer.nack(second)
    lags = {
        (g.topic, g.queue): (g.committed_offset, g.max_offset, g.lag)
        for g in group_lags(cirrusmq_stack.spark_options(), ["g-retry"], [topic_name])
    }
    assert lags == {(topic_name, 0): (2, 2, 0), (f"retry.g-retry.{topic_name}", 0): (0, 1, 1)}
    frames = stats(spark, cirrusmq_stack.spark_options(), [topic_name], groups=["g-retry"])
    assert sum(r.lag for r in frames["group_lag"].collect()) == 1
    assert frames["backlog"].collect() == []  # the backlog is of the topics read


def test_interval_arithmetic():
    assert subtract((0, 10), [(2, 4), (6, 7)]) == [(0, 2), (4, 6), (7, 10)]
    assert subtract((0, 10), [(0, 10)]) == [] and subtract((5, 8), []) == [(5, 8)]
    assert merge([(4, 6), (0, 2), (2, 3), (5, 9)]) == [(0, 3), (4, 9)]


def test_cli_export_and_replay(
    spark, cirrusmq_stack, admin, producer, topic_name, tmp_path, monkeypatch
):
    from cirrusmq.cli import app
    from typer.testing import CliRunner

    admin.create_topic(topic_name, queues=1)
    send_batches(producer, topic_name, batches=1, per_batch=3)
    options = tmp_path / "options.json"
    options.write_text(json.dumps(cirrusmq_stack.spark_options()))
    out = str(tmp_path / "export")
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["spark", "export", "--topic", topic_name, "--output", out, "--options-file", str(options)],
    )
    assert result.exit_code == 0, result.output
    assert "exported 3 messages" in result.output
    again = runner.invoke(
        app,
        [
            "spark",
            "export",
            "--topic",
            topic_name,
            "--output",
            out,
            "-o",
            "bogus=1",
            "--options-file",
            str(options),
        ],
    )
    assert "nothing new to export" in again.output

    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", cirrusmq_stack.endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", cirrusmq_stack.credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", cirrusmq_stack.credentials.secret_key)
    admin.create_topic(topic_name + "-r", queues=1)
    replayed = runner.invoke(
        app, ["spark", "replay", "--source", out, "--topic", topic_name + "-r", "--rate", "100"]
    )
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.output.strip().splitlines()[-1])["messages"] == 3
    assert admin.describe_topic(topic_name + "-r").message_count == 3


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
