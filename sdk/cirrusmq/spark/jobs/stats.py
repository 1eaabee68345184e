"""Stats: messages and bytes per topic, queue, tag and hour; consumer-group lag.

Writes under ``<output>``:

- ``messages/``: ``topic, queue, tag, hour, messages, bytes`` (bytes = body bytes) over every
  retained message of the topics (recomputed each run: overwritten);
- ``group_lag/``: one row per run, group, topic and queue: ``snapshot_time, group, topic,
  queue, committed_offset, max_offset, lag`` — appended, so successive runs (say hourly)
  make the lag-over-time series; the group's retry topics (``retry.<group>.<topic>``: its
  retries and redriven dead letters) have rows too, from offset 0 where it never read;
- ``backlog/``: per run, group, topic and stored hour, how many retained messages the group
  has not settled yet (``offset >= committed_offset``): how old the lag is.

Group state is read from the GroupsTable with the broker's own store (the rule of
``describe_group``: a queue's committed offset is its lowest unsettled offset), because the
job already reads the stack's tables and needs no API key; ``groupsTable`` must be set.

``python -m cirrusmq.spark.jobs.stats --topic T [--group G ...] --output PATH [-o k=v ...]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..options import StackOptions, get
from ..planning import QueueLog
from .common import add_option_arguments, load_options, reader, session

LAG_SCHEMA = (
    "snapshot_time TIMESTAMP, group STRING, topic STRING, queue INT, committed_offset BIGINT, "
    "max_offset BIGINT, lag BIGINT"
)


@dataclass(frozen=True)
class GroupLag:
    group: str
    topic: str
    queue: int
    committed_offset: int
    max_offset: int

    @property
    def lag(self) -> int:
        return max(0, self.max_offset - self.committed_offset)


def group_lags(
    options: Mapping[str, str], groups: Sequence[str], topics: Sequence[str]
) -> list[GroupLag]:
    """Where each group stands on each queue of ``topics`` it has consumed."""
    if not groups:
        return []
    stack = StackOptions.parse(options)
    if not stack.groups_table:
        raise ValueError("group lag needs the groupsTable option")
    from cirrusmq_broker.rules.retries import retry_topic
    from cirrusmq_broker.storage.groups import GroupStateStore

    store = GroupStateStore(stack.client("dynamodb"), stack.groups_table)
    heads = {t: QueueLog(stack, t, _int(get(options, "queues"))).heads() for t in topics}
    lags = []
    for group in groups:
        states, _ = store.list_group(group)
        settled = {(s.topic, s.queue): s.settled_offset() for s in states}
        for state in states:
            if state.topic in heads and state.queue in heads[state.topic]:
                lags.append(
                    GroupLag(
                        group,
                        state.topic,
                        state.queue,
                        state.settled_offset(),
                        heads[state.topic][state.queue],
                    )
                )
        for topic in topics:  # the group's retry topic: read from offset 0 by it only
            retry = retry_topic(group, topic)
            for queue, head in QueueLog(stack, retry).heads().items():
                if (retry, queue) in settled or head > 0:
                    lags.append(GroupLag(group, retry, queue, settled.get((retry, queue), 0), head))
    return sorted(lags, key=lambda g: (g.group, g.topic, g.queue))


def stats(
    spark: Any,
    options: Mapping[str, str],
    topics: Sequence[str],
    output: str | None = None,
    *,
    groups: Sequence[str] = (),
    now_ms: int | None = None,
) -> dict[str, Any]:
    """The three tables as DataFrames (``messages``, ``group_lag``, ``backlog``); written
    under ``output`` when given."""
    import datetime as dt

    from pyspark.sql import functions as F

    frames = [
        reader(spark, options, t, startingOffsets="earliest", endingOffsets="latest")
        for t in topics
    ]
    data = frames[0]
    for other in frames[1:]:
        data = data.unionByName(other)
    data = data.withColumn("hour", F.date_trunc("hour", "stored_timestamp"))
    messages = data.groupBy("topic", "queue", "tag", "hour").agg(
        F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).alias("bytes")
    )
    stack = StackOptions.parse(options)
    when = dt.datetime.fromtimestamp((now_ms or stack.now_s() * 1000) / 1000, dt.UTC)
    lags = group_lags(options, groups, topics)
    lag = spark.createDataFrame(
        [(when, g.group, g.topic, g.queue, g.committed_offset, g.max_offset, g.lag) for g in lags],
        LAG_SCHEMA,
    )
    committed = lag.select("group", "topic", "queue", "committed_offset", "snapshot_time")
    backlog = (
        data.join(committed, ["topic", "queue"])
        .where(F.col("offset") >= F.col("committed_offset"))
        .groupBy("snapshot_time", "group", "topic", "hour")
        .agg(F.count(F.lit(1)).alias("unsettled"))
    )
    if output:
        root = output.rstrip("/")
        messages.write.mode("overwrite").parquet(f"{root}/messages")
        lag.write.mode("append").parquet(f"{root}/group_lag")
        backlog.write.mode("append").parquet(f"{root}/backlog")
    return {"messages": messages, "group_lag": lag, "backlog": backlog}


def _int(text: str | None) -> int | None:
    return int(text) if text else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cirrusmq.spark.jobs.stats", description=__doc__)
    parser.add_argument("--topic", action="append", required=True, help="repeatable")
    parser.add_argument("--group", action="append", default=[], help="repeatable")
    parser.add_argument("--output", required=True)
    add_option_arguments(parser)
    args = parser.parse_args(argv)
    spark = session("cirrusmq-stats", args.master)
    frames = stats(
        spark,
        load_options(args.option, args.options_file),
        args.topic,
        args.output,
        groups=args.group,
    )
    lag = [r.asDict() for r in frames["group_lag"].collect()]
    print(json.dumps({"group_lag": lag}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
