"""Helpers of the Spark tests: sending known messages, draining a group, mirroring objects."""

from __future__ import annotations

import time
import zlib
from pathlib import Path

from cirrusmq import Message, SimpleConsumer


def group_for(queue: int, queues: int) -> str:
    """A message group the broker routes to ``queue`` (crc32 of the group, modulo queues)."""
    return next(f"g{n}" for n in range(1000) if zlib.crc32(f"g{n}".encode()) % queues == queue)


def send_batches(
    producer, topic: str, batches: int, per_batch: int, *, queues: int = 1, tag_of=None
) -> list:
    """``batches`` requests of ``per_batch`` messages each, message ``i`` to queue
    ``i % queues`` (so each request writes one object per queue)."""
    receipts = []
    for b in range(batches):
        messages = [
            Message(
                topic,
                f"body-{b}-{i}".encode(),
                tag=(tag_of(b, i) if tag_of else ("even" if i % 2 == 0 else "odd")),
                keys=(f"k{b}", f"i{i}"),
                properties={"batch": str(b), "i": str(i)},
                message_group=group_for(i % queues, queues) if queues > 1 else None,
            )
            for i in range(per_batch)
        ]
        receipts.extend(producer.send_batch(messages))
        producer.flush()
    return receipts


def drain(stack, group: str, topic: str, expected: int, *, timeout_s: float = 60) -> list:
    """Receive and ack until ``expected`` messages came (or the timeout)."""
    got: dict[str, object] = {}
    deadline = time.monotonic() + timeout_s
    with SimpleConsumer(stack.endpoint, stack.credentials, group, [topic], 1) as consumer:
        while len(got) < expected and time.monotonic() < deadline:
            messages = consumer.receive(100, 60)
            for m in messages:
                got[m.message_id] = m
            if messages:
                consumer.ack_batch(messages)
    return list(got.values())


def mirror(stack, prefix: str, into: Path) -> list[Path]:
    """Download every object under ``prefix`` from the moto server into ``into`` (same keys)."""
    s3 = stack.boto3_client("s3")
    bucket = stack.resources["MessageBucket"]
    written = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            path = into / obj["Key"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read())
            written.append(path)
    return written


def load(spark, stack, topic: str, **options: str):
    """A batch read of ``topic`` through the data source."""
    return (
        spark.read.format("cirrusmq")
        .options(**stack.spark_options())
        .option("topic", topic)
        .options(**options)
        .load()
    )
