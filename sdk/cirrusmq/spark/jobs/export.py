"""Export: a topic's offsets or time range → a Parquet dataset partitioned by date and tag.

Layout: ``<output>/dt=<yyyy-mm-dd>/tag=<tag>/part-<run>-<n>.parquet`` (a message without a
tag lands in ``tag=__HIVE_DEFAULT_PARTITION__``, read back as null) with the data source's
columns, and ``<output>/_cirrusmq_export.json``: the offsets exported so far per topic and
queue. Re-runs are idempotent: a run exports only offsets not yet recorded there; it writes
into ``_staging/<run>`` first, then moves the files to names derived from the run (a re-run
after a crash deletes what an interrupted move left and moves again), and records the
offsets last. Before moving files it records the run as pending in the manifest (its
pieces): the next run first finishes a pending run with the same pieces (the same run id
and file names), whatever the log did since, so no offset is exported twice. Run without
offsets, it exports what is new since the last run (incremental).
Exports into one output must not run concurrently.

``python -m cirrusmq.spark.jobs.export --topic T --output PATH [-o key=value ...]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..options import ReadOptions, StackOptions
from ..planning import QueueLog
from .common import HadoopFS, add_option_arguments, load_options, reader, session

MANIFEST = "_cirrusmq_export.json"
STAGING = "_staging"
PENDING = "_export.pending"
"""Manifest key (a "." no topic a user names has): per topic, the run moving its files."""

Interval = tuple[int, int]


@dataclass(frozen=True)
class ExportResult:
    run: str | None
    """The run's id (None: nothing new to export)."""
    messages: int
    ranges: dict[int, list[Interval]] = field(default_factory=dict)
    """Per queue, the offset ranges ``[start, end)`` this run exported."""
    files: int = 0


def subtract(wanted: Interval, done: Sequence[Interval]) -> list[Interval]:
    """The parts of ``wanted`` that no interval of ``done`` covers, in order."""
    pieces, (start, end) = [], wanted
    for a, b in sorted(done):
        if b <= start or a >= end:
            continue
        if a > start:
            pieces.append((start, a))
        start = max(start, b)
    if start < end:
        pieces.append((start, end))
    return pieces


def merge(intervals: Sequence[Interval]) -> list[Interval]:
    """``intervals`` as the fewest sorted, disjoint ones."""
    merged: list[list[int]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def export(
    spark: Any,
    options: Mapping[str, str],
    topic: str,
    output: str,
    *,
    starting_offsets: str | None = None,
    ending_offsets: str | None = None,
    starting_timestamp: int | None = None,
    ending_timestamp: int | None = None,
) -> ExportResult:
    """Export ``[start, end)`` of every queue of ``topic`` minus what ``output`` holds.

    A run that crashed after it began moving files is finished first (its offsets were
    recorded as pending before any file moved): otherwise a re-run, planning again against
    a log that moved on, would get another run id and leave the crashed run's files next to
    its own, exporting those offsets twice."""
    fs = HadoopFS(spark, output)
    finished = _finish_pending(spark, fs, options, topic)
    manifest = _manifest(fs)
    done = {int(q): [tuple(i) for i in v] for q, v in manifest.get(topic, {}).items()}
    selection = {
        "topic": topic,
        "startingOffsets": starting_offsets,
        "endingOffsets": ending_offsets,
        "startingTimestamp": None if starting_timestamp is None else str(starting_timestamp),
        "endingTimestamp": None if ending_timestamp is None else str(ending_timestamp),
    }
    read = ReadOptions.parse({**options, **{k: v for k, v in selection.items() if v is not None}})
    log = QueueLog(StackOptions.parse(options), topic, read.queues)
    start, end = log.batch_range(read)  # consistent heads: the end is what was appended
    pieces = {q: subtract((start[q], end[q]), done.get(q, [])) for q in start}
    pieces = {q: p for q, p in pieces.items() if p}
    if not pieces:
        return finished or ExportResult(None, 0)
    result = _run(spark, fs, options, topic, pieces, list(start))
    if finished is None:
        return result
    ranges = {
        q: merge(finished.ranges.get(q, []) + result.ranges.get(q, []))
        for q in set(finished.ranges) | set(result.ranges)
    }
    return ExportResult(
        result.run, finished.messages + result.messages, ranges, finished.files + result.files
    )


def _manifest(fs: HadoopFS) -> dict[str, Any]:
    return json.loads(fs.read_text(f"{fs.root}/{MANIFEST}") or "{}")


def _write_manifest(fs: HadoopFS, manifest: dict[str, Any]) -> None:
    fs.write_text(f"{fs.root}/{MANIFEST}", json.dumps(manifest, indent=1, sort_keys=True))


def _finish_pending(
    spark: Any, fs: HadoopFS, options: Mapping[str, str], topic: str
) -> ExportResult | None:
    """Run again, with the same pieces (so the same run id and file names), a run of
    ``topic`` that crashed between recording itself pending and recording its offsets."""
    pending = _manifest(fs).get(PENDING, {}).get(topic)
    if not pending:
        return None
    pieces = {int(q): [tuple(i) for i in v] for q, v in pending["pieces"].items()}
    return _run(spark, fs, options, topic, pieces, [int(q) for q in pending["queues"]])


def _run(
    spark: Any,
    fs: HadoopFS,
    options: Mapping[str, str],
    topic: str,
    pieces: dict[int, list[Interval]],
    queues: list[int],
) -> ExportResult:
    """Export ``pieces`` (per queue, offset ranges) as one run: stage, record the run as
    pending, move the files, record the offsets (and clear the pending run)."""
    run = hashlib.sha256(json.dumps([topic, sorted(pieces.items())]).encode()).hexdigest()[:16]
    frames = []
    for i in range(max(len(p) for p in pieces.values())):
        # queues without a piece in this round read nothing ([0, 0)), not their defaults
        round_ = {q: (p[i] if i < len(p) else (0, 0)) for q, p in pieces.items()}
        round_.update({q: (0, 0) for q in queues if q not in round_})
        frames.append(
            reader(
                spark,
                {k: v for k, v in options.items() if k.lower() not in _RANGE_OPTIONS},
                topic,
                startingOffsets=json.dumps({str(q): a for q, (a, _) in round_.items()}),
                endingOffsets=json.dumps({str(q): b for q, (_, b) in round_.items()}),
            )
        )
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    from pyspark.sql import functions as F

    frame = frame.withColumn("dt", F.date_format("stored_timestamp", "yyyy-MM-dd"))
    staging = f"{fs.root}/{STAGING}/{run}"
    frame.write.mode("overwrite").partitionBy("dt", "tag").parquet(staging)
    messages = spark.read.parquet(staging).count() if fs.files(staging, ".parquet") else 0

    manifest = _manifest(fs)
    manifest.setdefault(PENDING, {})[topic] = {
        "run": run,
        "queues": sorted(queues),
        "pieces": {str(q): [list(i) for i in v] for q, v in sorted(pieces.items())},
    }
    _write_manifest(fs, manifest)  # before any file moves: a re-run finishes this run
    files = _publish(fs, staging, run)
    manifest = _manifest(fs)
    done = {int(q): [tuple(i) for i in v] for q, v in manifest.get(topic, {}).items()}
    recorded = {str(q): merge(done.get(q, []) + pieces.get(q, [])) for q in set(done) | set(pieces)}
    manifest[topic] = {q: [list(i) for i in v] for q, v in sorted(recorded.items())}
    manifest.get(PENDING, {}).pop(topic, None)
    if not manifest.get(PENDING):
        manifest.pop(PENDING, None)
    _write_manifest(fs, manifest)
    fs.delete(f"{fs.root}/{STAGING}")
    return ExportResult(run, messages, pieces, files)


_RANGE_OPTIONS = {"startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp"}


def _publish(fs: HadoopFS, staging: str, run: str) -> int:
    """Move the staged files to ``<dt>/<tag>/part-<run>-<n>.parquet`` (replacing what an
    interrupted move of the same run left)."""
    staged_root = fs.qualified(staging)
    staged = fs.files(staging, ".parquet")
    for leftover in fs.files(fs.root, ".parquet"):
        if f"/part-{run}-" in leftover and not leftover.startswith(staged_root):
            fs.delete(leftover)
    counters: dict[str, int] = {}
    for source in staged:
        partition = source[len(staged_root) :].strip("/").rsplit("/", 1)[0]
        n = counters[partition] = counters.get(partition, -1) + 1
        fs.rename(source, f"{fs.root}/{partition}/part-{run}-{n:05d}.parquet")
    return len(staged)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cirrusmq.spark.jobs.export", description=__doc__)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="dataset path (local, hdfs://, s3a://)")
    parser.add_argument("--starting-offsets", help="earliest, latest or JSON per queue")
    parser.add_argument("--ending-offsets", help="earliest, latest or JSON per queue")
    parser.add_argument("--starting-timestamp", type=int, help="ms since the epoch")
    parser.add_argument("--ending-timestamp", type=int, help="ms since the epoch (inclusive)")
    add_option_arguments(parser)
    args = parser.parse_args(argv)
    spark = session("cirrusmq-export", args.master)
    result = export(
        spark,
        load_options(args.option, args.options_file),
        args.topic,
        args.output,
        starting_offsets=args.starting_offsets,
        ending_offsets=args.ending_offsets,
        starting_timestamp=args.starting_timestamp,
        ending_timestamp=args.ending_timestamp,
    )
    print(json.dumps(result.__dict__, default=list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
