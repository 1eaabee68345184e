"""Spark read benchmark: rows/s of the ``cirrusmq`` data source vs plain Parquet reads of the
same batch objects (over the same S3 endpoint, and Spark's native reader on a local copy).

    python tests/benchmarks/spark_read.py [--messages 20000] [--batch 500] [--body 256]
                                          [--queues 8] [--repeat 3] [--master local[2]]

It starts a ``LocalStack``, produces ``--messages`` messages of ``--body`` bytes through the
SDK Producer in batches of ``--batch`` (one object per batch), then, in one local Spark
session, times (best of ``--repeat`` rounds, each round running every reader once, so a slow
spell of the shared machine hits them all) a full materialization of every column (the
``noop`` sink) of:

1. the data source (planning from the log index in DynamoDB, executors fetching the objects
   from S3 — both the moto server — with boto3 and decoding them with pyarrow), its objects
   packed into tasks by bytes over the session's cores (the default);
2. the data source with ``objectsPerPartition=8`` (tasks of 8 objects of one queue, the
   layout before packing by bytes) and with ``fetchThreads=1`` (one GET at a time per task);
3. the S3 baseline: the same objects over the same S3 endpoint in the same tasks (packed
   as 1 packs them), read by pyarrow's own S3 filesystem (``pyarrow.fs.S3FileSystem``) in a
   minimal Python data source yielding the objects' record batches: no index, no offsets —
   what any Python reader of these objects pays (``spark.read.parquet("s3a://...")`` needs
   hadoop-aws, which pyspark does not ship);
4. Spark's native Parquet reader on a local mirror of the same ``topics/topic=<t>/`` prefix
   (downloaded first; not timed): no index, no HTTP, Spark's vectorized reader.

Then a breakdown of the data source's work outside Spark, in this process: planning (the
index and heads in DynamoDB), and reading every planned partition (S3 GETs, decoding).
All figures come from one run in one process; compare ratios, not absolute numbers (the
moto server answers ~100-300 operations/s on a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

OURS = "data source (packed by bytes)"
BASELINE = "S3 baseline (pyarrow S3, same tasks)"
NATIVE = "native Parquet, local mirror"
GOALS = {"baseline": 0.8, "native": 0.5}
"""The data source's rows/s as a share of the S3 baseline's and of native Parquet's."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--body", type=int, default=256)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from cirrusmq import Admin, Message, Producer
    from cirrusmq.spark import register
    from cirrusmq.testing import LocalStack
    from pyspark.sql import SparkSession

    with LocalStack(schedules=False) as stack, tempfile.TemporaryDirectory() as tmp:
        topic = "bench-spark"
        with Admin(stack.endpoint, stack.credentials) as admin:
            admin.create_topic(topic, queues=args.queues)
        started = time.perf_counter()
        body = os.urandom(args.body)
        with Producer(
            stack.endpoint, stack.credentials, max_batch_messages=args.batch, linger_ms=50
        ) as producer:
            for start in range(0, args.messages, args.batch):
                count = min(args.batch, args.messages - start)
                producer.send_batch(
                    [Message(topic, body, tag=f"t{i % 4}", keys=(f"k{i}",)) for i in range(count)]
                )
        s3 = stack.boto3_client("s3")
        bucket = stack.resources["MessageBucket"]
        objects = 0
        for page in s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=f"topics/topic={topic}/"
        ):
            for obj in page.get("Contents", []):
                path = Path(tmp) / obj["Key"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
                objects += 1
        print(
            f"stored {args.messages} messages of {args.body} B in {objects} objects "
            f"({time.perf_counter() - started:.1f} s, produce + mirror)"
        )

        spark = (
            SparkSession.builder.master(args.master)
            .appName("cirrusmq-spark-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        options = stack.spark_options()

        def source(**extra: str):
            reader = spark.read.format("cirrusmq").options(**options).option("topic", topic)
            return reader.options(**extra).load()

        spark.dataSource.register(S3Baseline)
        baseline = {
            "bucket": bucket,
            "prefix": f"topics/topic={topic}/",
            "endpoint": stack.aws_endpoint,
            "region": options["region"],
            "key": options["accessKeyId"],
            "secret": options["secretAccessKey"],
            "minPartitions": str(spark.sparkContext.defaultParallelism),
        }

        cases = {
            OURS: lambda: source(),
            "data source (objectsPerPartition=8)": lambda: source(objectsPerPartition="8"),
            "data source (fetchThreads=1)": lambda: source(fetchThreads="1"),
            BASELINE: lambda: spark.read.format(S3Baseline.name()).options(**baseline).load(),
            NATIVE: lambda: spark.read.parquet(str(Path(tmp) / "topics")),
        }
        pushdown = spark.conf.get("spark.sql.python.filterPushdown.enabled", None)
        print(
            f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, {args.master}, "
            f"spark.sql.python.filterPushdown.enabled={pushdown}"
        )
        print(f"{'reader':<34} {'rows':>8} {'best s':>8} {'rows/s':>10} {'plan s':>7}")
        counts = {name: make().count() for name, make in cases.items()}
        best = dict.fromkeys(cases, float("inf"))
        plan = dict.fromkeys(cases, float("inf"))
        for _ in range(args.repeat):  # rounds of every reader: a slow spell hits them all
            for name, make in cases.items():
                t = time.perf_counter()
                make().write.format("noop").mode("overwrite").save()
                best[name] = min(best[name], time.perf_counter() - t)
                t = time.perf_counter()
                make()._jdf.queryExecution().executedPlan()  # planning only (part of best s)
                plan[name] = min(plan[name], time.perf_counter() - t)
        rates: dict[str, float] = {}
        readers: dict[str, dict[str, float]] = {}
        for name, rows in counts.items():
            rates[name] = rows / best[name]
            readers[name] = {"rows": rows, "best_s": best[name], "rows_per_s": rates[name]}
            print(
                f"{name:<34} {rows:>8} {best[name]:>8.2f} {rates[name]:>10,.0f} {plan[name]:>7.2f}"
            )
        ratios = {"baseline": rates[OURS] / rates[BASELINE], "native": rates[OURS] / rates[NATIVE]}
        print(
            f"data source / S3 baseline {ratios['baseline']:.2f} (goal >= {GOALS['baseline']}), "
            f"/ native local mirror {ratios['native']:.2f} (goal >= {GOALS['native']}) "
            f"(load average {os.getloadavg()[0]:.1f})"
        )
        spark.stop()
        breakdown(options, topic)
    if args.json:
        data = {
            "messages": args.messages,
            "body_bytes": args.body,
            "batch": args.batch,
            "objects": objects,
            "master": args.master,
            "repeat": args.repeat,
            "rounds": "interleaved",
            "readers": readers,
            "ratios": ratios,
            "goals": GOALS,
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")


def breakdown(options: dict[str, str], topic: str) -> None:
    """Where the data source's time goes, outside Spark: planning, then the executors' work."""
    from cirrusmq.spark.options import ReadOptions, StackOptions
    from cirrusmq.spark.source import CirrusMQBatchReader

    read = ReadOptions.parse({**options, "topic": topic})
    reader = CirrusMQBatchReader(StackOptions.parse(options), read)
    t = time.perf_counter()
    partitions = reader.partitions()
    planned = time.perf_counter() - t
    t = time.perf_counter()
    rows = sum(b.num_rows for p in partitions for b in reader.read(p))
    fetched = time.perf_counter() - t
    print(
        f"breakdown (this process, no Spark): planning {planned:.2f} s "
        f"({len(partitions)} partitions); reading {rows} rows {fetched:.2f} s"
    )


class S3Baseline(DataSource):
    """Batch objects read with pyarrow's S3 filesystem: one task per group of objects."""

    @classmethod
    def name(cls) -> str:
        return "cirrusmq_bench_s3_baseline"

    def schema(self):  # type: ignore[no-untyped-def]
        from cirrusmq.spark.rows import ARROW_SCHEMA
        from pyspark.sql.pandas.types import from_arrow_schema

        fields = [f for f in ARROW_SCHEMA if f.name not in ("topic", "queue", "offset")]
        return from_arrow_schema(pa.schema(fields))

    def reader(self, schema):  # type: ignore[no-untyped-def]
        return S3BaselineReader(dict(self.options))


class S3BaselineReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def _fs(self):  # type: ignore[no-untyped-def]
        from pyarrow import fs

        endpoint = self.options["endpoint"].split("://", 1)[-1]
        return fs.S3FileSystem(
            access_key=self.options["key"],
            secret_key=self.options["secret"],
            region=self.options["region"],
            endpoint_override=endpoint,
            scheme="http",
        )

    def partitions(self):  # type: ignore[no-untyped-def]
        from pyarrow import fs

        root = f"{self.options['bucket']}/{self.options['prefix'].rstrip('/')}"
        found = self._fs().get_file_info(fs.FileSelector(root, recursive=True))
        by_queue: dict[str, list[str]] = {}
        sizes = {info.path: info.size for info in found}
        for info in found:
            if info.is_file and info.path.endswith(".parquet"):
                by_queue.setdefault(info.path.split("/queue=")[1].split("/")[0], []).append(
                    info.path
                )
        from cirrusmq.spark.options import (
            DEFAULT_MAX_PARTITION_BYTES,
            DEFAULT_OPEN_COST_BYTES,
            get,
        )
        from cirrusmq.spark.planning import Slice, pack

        objects = [
            Slice(int(queue), path, 0, 0, 0, sizes[path])
            for queue in sorted(by_queue, key=int)
            for path in sorted(by_queue[queue])
        ]
        groups = pack(
            objects,
            max_partition_bytes=DEFAULT_MAX_PARTITION_BYTES,
            open_cost_bytes=DEFAULT_OPEN_COST_BYTES,
            min_partitions=int(get(self.options, "minPartitions") or 1),
        )
        return [InputPartition([s.object_key for s in group]) for group in groups]

    def read(self, partition):  # type: ignore[no-untyped-def]
        import pyarrow.parquet as pq
        from cirrusmq.spark.rows import ARROW_SCHEMA

        target = [f for f in ARROW_SCHEMA if f.name not in ("topic", "queue", "offset")]
        filesystem = self._fs()
        for path in partition.value:
            table = pq.read_table(path, filesystem=filesystem)
            # the large-body pointer columns are only in objects that hold a pointer
            columns = [
                table[f.name].cast(f.type)
                if f.name in table.column_names
                else pa.nulls(table.num_rows, f.type)
                for f in target
            ]
            yield from pa.Table.from_arrays(columns, schema=pa.schema(target)).to_batches()


if __name__ == "__main__":
    main()
