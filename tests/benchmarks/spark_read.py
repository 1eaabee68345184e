"""Spark read benchmark: rows/s of the ``cirrusmq`` data source vs Spark's native Parquet
reader on the same batch objects.

    python tests/benchmarks/spark_read.py [--messages 20000] [--batch 500] [--body 256]
                                          [--queues 8] [--repeat 3] [--master local[2]]

It starts a ``LocalStack``, produces ``--messages`` messages of ``--body`` bytes through the
SDK Producer in batches of ``--batch`` (one object per batch), then, in one local Spark
session, times (best of ``--repeat``) a full materialization of every column (the ``noop``
sink) of:

1. the data source (planning from the log index in DynamoDB, executors fetching the objects
   from S3 — both the moto server — with boto3 and decoding them with pyarrow);
2. the data source with ``objectsPerPartition=1`` (one task per object);
3. Spark's native Parquet reader on a local mirror of the same ``topics/topic=<t>/`` prefix
   (downloaded first; not timed): no index, no HTTP, Spark's vectorized reader.

The data source pays the moto server's HTTP round trips (~100 ops/s on a loaded machine)
that S3 in AWS answers far faster; the native figure is the ceiling for the same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--body", type=int, default=256)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
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
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        options = stack.spark_options()

        def source(**extra: str):
            reader = spark.read.format("cirrusmq").options(**options).option("topic", topic)
            return reader.options(**extra).load()

        cases = {
            "data source (8 objects/task)": lambda: source(),
            "data source (1 object/task)": lambda: source(objectsPerPartition="1"),
            "native Parquet, local mirror": lambda: spark.read.parquet(str(Path(tmp) / "topics")),
        }
        print(f"{'reader':<32} {'rows':>8} {'best s':>8} {'rows/s':>10}")
        for name, make in cases.items():
            rows = make().count()
            best = float("inf")
            for _ in range(args.repeat):
                t = time.perf_counter()
                make().write.format("noop").mode("overwrite").save()
                best = min(best, time.perf_counter() - t)
            print(f"{name:<32} {rows:>8} {best:>8.2f} {rows / best:>10,.0f}")
        spark.stop()


if __name__ == "__main__":
    main()
