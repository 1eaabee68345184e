"""Replay: publish a dataset (an export, a data source read, any frame with a ``body``
column) back into a topic through the SDK, rate-limited and idempotent.

Rows go in a fixed order (``stored_timestamp, topic, queue, offset, message_id`` as far as
the frame has them) in chunks of at most ``batch_size`` messages / ~1 MiB, each sent as one
produce request signed by the SDK's :class:`~cirrusmq.transport.Transport` (the Producer's
wire form) with a producer stamp derived from the replay: producer id
``replay-<sha256(replay id, topic)>`` and sequence = chunk number. A re-run (after a crash,
or by mistake) sends the same chunks with the same stamps, which the service recognizes and
stores nothing twice (``duplicate`` in its answer) — within the service's idempotency
window. The SDK Producer itself is not used because it batches by timing and stamps with a
random producer id: a re-run could not be recognized. Message ids, tags, keys, properties,
message groups and born timestamps are kept (a replayed message keeps its id, as the
broker's own moves do).

``python -m cirrusmq.spark.jobs.replay --source PATH --topic T --endpoint URL ...``
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

ORDER = ("stored_timestamp", "topic", "queue", "offset", "message_id")
MAX_CHUNK_BYTES = 1024 * 1024
"""JSON bytes per request, as the SDK Producer's default ``max_batch_bytes``."""


@dataclass(frozen=True)
class ReplayResult:
    producer_id: str
    messages: int
    requests: int
    already_stored: int
    """Messages of chunks the service had stored before (a re-run)."""


def producer_id_for(replay_id: str, topic: str) -> str:
    digest = hashlib.sha256(f"{replay_id}\n{topic}".encode()).hexdigest()[:32]
    return f"replay-{digest}"


def chunks(rows: Iterable[Any], batch_size: int) -> Iterator[list[dict[str, Any]]]:
    """The wire forms of ``rows`` in chunks of ``batch_size`` messages / ~1 MiB."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for position, row in enumerate(rows):
        wire = _wire(row.asDict() if hasattr(row, "asDict") else dict(row), position)
        length = len(json.dumps(wire, separators=(",", ":")))
        if chunk and (len(chunk) >= batch_size or size + length > MAX_CHUNK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(wire)
        size += length
    if chunk:
        yield chunk


def _wire(row: dict[str, Any], position: int) -> dict[str, Any]:
    body = row["body"]
    body = body.encode() if isinstance(body, str) else bytes(body)
    message_id = row.get("message_id") or f"replayed-{position}"
    wire: dict[str, Any] = {
        "message_id": message_id,
        "body": base64.b64encode(body).decode("ascii"),
    }
    born = row.get("born_timestamp")
    if born is not None:
        wire["born_timestamp"] = (
            int(born.timestamp() * 1000) if hasattr(born, "timestamp") else int(born)
        )
    for name in ("tag", "message_group"):
        value = row.get(name)
        if value is not None and value != "":
            # str(): a dataset read with partition type inference holds tag=007 as 7 and
            # tag=2024-01-01 as a date (see read_dataset, which keeps them strings)
            wire[name] = value.isoformat() if hasattr(value, "isoformat") else str(value)
    if row.get("keys"):
        wire["keys"] = list(row["keys"])
    if row.get("properties"):
        wire["properties"] = dict(row["properties"])
    return wire


def replay_rows(
    rows: Iterable[Any],
    transport: Any,
    topic: str,
    *,
    replay_id: str,
    rate: float | None = None,
    batch_size: int = 100,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> ReplayResult:
    """Send ``rows`` to ``topic`` through ``transport`` at most ``rate`` messages a second."""
    producer_id = producer_id_for(replay_id, topic)
    path = f"/v1/topics/{quote(topic, safe='')}/messages"
    sent = requests = already = 0
    started = clock()
    for sequence, chunk in enumerate(chunks(rows, batch_size)):
        if rate:
            due = started + sent / rate
            if due > clock():
                sleep(due - clock())
        body = transport.request(
            "POST",
            path,
            json_body={"producer_id": producer_id, "sequence": sequence, "messages": chunk},
        )
        requests += 1
        sent += len(chunk)
        if isinstance(body, dict) and body.get("duplicate"):
            already += len(chunk)
    return ReplayResult(producer_id, sent, requests, already)


STRING_PARTITIONS = ("tag", "dt")
"""An export's partition columns: always strings (tag=007 is the tag "007", not 7)."""


def read_dataset(spark: Any, path: str) -> Any:
    """A Parquet dataset (an export) with its ``tag`` / ``dt`` partition columns read as
    strings. Spark infers partition column types from directory names by default
    (``spark.sql.sources.partitionColumnTypeInference.enabled``): tags that look like
    numbers or dates would come back as integers or dates. Read exports this way (or with
    that setting off, or an explicit schema with ``tag string``)."""
    from pyspark.sql.types import StringType, StructField, StructType

    inferred = spark.read.parquet(path).schema
    if not any(f.name in STRING_PARTITIONS for f in inferred.fields):
        return spark.read.parquet(path)
    schema = StructType(
        [
            StructField(f.name, StringType(), True) if f.name in STRING_PARTITIONS else f
            for f in inferred.fields
        ]
    )
    return spark.read.schema(schema).parquet(path)


def ordered(frame: Any) -> Any:
    """``frame`` in the replay's fixed order."""
    columns = [c for c in ORDER if c in frame.columns]
    return frame.orderBy(*columns) if columns else frame


def replay(
    spark: Any,
    source: str | Any,
    topic: str,
    *,
    endpoint: str,
    credentials: Any = None,
    replay_id: str | None = None,
    rate: float | None = None,
    batch_size: int = 100,
) -> ReplayResult:
    """Replay a Parquet dataset (path) or a DataFrame into ``topic``. ``replay_id`` names
    the replay (default: the source path); the same id and topic make a re-run a no-op."""
    from ...transport import Transport

    if isinstance(source, str):
        frame = read_dataset(spark, source)
        replay_id = replay_id or source
    else:
        frame = source
        if replay_id is None:
            raise ValueError("replaying a DataFrame needs a replay_id")
    with_body = ordered(frame)
    transport = Transport(endpoint, credentials)
    try:
        return replay_rows(
            with_body.toLocalIterator(),
            transport,
            topic,
            replay_id=replay_id,
            rate=rate,
            batch_size=batch_size,
        )
    finally:
        transport.close()


def main(argv: Sequence[str] | None = None) -> int:
    from ...config import load_config
    from .common import session

    parser = argparse.ArgumentParser(prog="cirrusmq.spark.jobs.replay", description=__doc__)
    parser.add_argument("--source", required=True, help="Parquet dataset (e.g. an export)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--replay-id", help="names the replay (default: the source path)")
    parser.add_argument("--rate", type=float, help="messages per second (default: no limit)")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--endpoint", help="API URL (else CIRRUSMQ_ENDPOINT / the profile)")
    parser.add_argument("--access-key")
    parser.add_argument("--secret-key")
    parser.add_argument("--profile")
    parser.add_argument("--master")
    args = parser.parse_args(argv)
    config = load_config(
        endpoint=args.endpoint,
        access_key=args.access_key,
        secret_key=args.secret_key,
        profile=args.profile,
    )
    spark = session("cirrusmq-replay", args.master)
    result = replay(
        spark,
        args.source,
        args.topic,
        endpoint=config.endpoint,
        credentials=config.credentials,
        replay_id=args.replay_id,
        rate=args.rate,
        batch_size=args.batch_size,
    )
    print(json.dumps(result.__dict__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
