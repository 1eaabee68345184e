"""The cost of a lookup by key per hour of index searched, and the key filter's false positives.

    python tests/benchmarks/find_by_key.py [--batches 3600] [--keys-per-batch 10] [--probes 200]

Runs the broker in-process on moto (``moto.mock_aws``, tables and bucket from template.yaml)
with a fake clock, and counts every AWS call through
``cirrusmq_broker.storage.clients.observe_calls``. Stores one hour of traffic: ``--batches``
produce requests one after another over 3,600 s on a topic of 8 queues, each request one
batch of ``--keys-per-batch`` messages with one random key each. Then:

- the false-positive rate: ``--probes`` random keys that no message has, each checked
  against every stored batch's filter as read back from the index (probes x batches
  checks);
- one lookup of a key held by one message, and ``--probes`` lookups of absent keys, each
  paged to the end with a cold batch cache (a fresh reader; the topic record cached): the
  index queries, the read units they take (each query's items summed and rounded up to
  4 KB, half a unit per 4 KB: eventually consistent) and the S3 GETs (the batch that holds
  the key, plus false positives).

Prices: us-east-1 list prices of 2026-12-02, DynamoDB on-demand $0.125 per million read
request units, S3 Standard $0.0004 per 1,000 GET requests.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
READ_UNIT_PRICE = 0.125 / 1_000_000
GET_PRICE = 0.0004 / 1000
QUEUES = 8


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB counts it: attribute names plus values (numbers about
    one byte per two digits plus one)."""
    size = 0
    for name, value in item.items():
        size += len(name)
        kind, raw = next(iter(value.items()))
        if kind == "S":
            size += len(raw.encode())
        elif kind == "N":
            size += math.ceil(len(raw.lstrip("-").replace(".", "")) / 2) + 1
        elif kind == "B":
            size += len(raw)
        else:
            size += len(str(raw))
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=3600)
    parser.add_argument("--keys-per-batch", type=int, default=10)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=20261202)
    args = parser.parse_args()

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    for part in ("layers/broker", "layers/api", "infra", "sdk"):
        sys.path.insert(0, str(ROOT / part))
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.model import MessageInput
    from cirrusmq_broker.rules import key_filter
    from cirrusmq_broker.services.batch_reader import BatchReader
    from cirrusmq_broker.services.key_lookup import KeyLookup
    from cirrusmq_broker.storage.clients import observe_calls
    from cirrusmq_local.in_process import broker_settings
    from moto import mock_aws

    rng = random.Random(args.seed)
    now = [1_790_000_000_000]
    with mock_aws():
        settings = broker_settings(
            ROOT / "template.yaml", receipt_secret="benchmark-secret-0123456789abcdef"
        )
        broker = Broker(settings, lambda: now[0])
        broker.admin.create_topic("t", queues=QUEUES)
        start = now[0]
        step_ms = 3_600_000 // args.batches
        wanted = f"wanted-{rng.getrandbits(64):x}"
        hit_batch = args.batches // 2
        for b in range(args.batches):
            keys = [f"k-{rng.getrandbits(64):x}" for _ in range(args.keys_per_batch)]
            if b == hit_batch:
                keys[0] = wanted
            broker.produce.send("t", [MessageInput(b"x" * 100, keys=(k,)) for k in keys])
            now[0] += step_ms
        end = now[0]

        # the filters as stored, and the items' sizes
        import boto3

        ddb = boto3.client("dynamodb", region_name="us-east-1")
        items: list[dict[str, Any]] = []
        for page in ddb.get_paginator("scan").paginate(TableName=settings.log_index_table):
            items.extend(page["Items"])
        filters = [bytes(i["key_filter"]["B"]) if "key_filter" in i else None for i in items]
        sizes = [item_bytes(i) for i in items]
        false_positives = sum(
            key_filter.may_contain(f, f"absent-{rng.getrandbits(64):x}")
            for _ in range(args.probes)
            for f in filters
        )
        checks = args.probes * len(filters)

        # lookups, each with a cold batch cache, paged to the end; read units per query
        units: list[float] = []

        def observe(service: str, op: str, params: dict[str, Any]) -> None:
            calls.update([f"{service}:{op}"])

        def lookup(key: str) -> int:
            fresh = KeyLookup(
                topics=broker.catalog,
                index=broker.index,
                reader=BatchReader(broker.objects),
                clock=lambda: now[0],
            )
            found, token = 0, None
            while True:
                page = fresh.find("t", key, begin_ms=start, end_ms=end, limit=100, page_token=token)
                found += len(page.messages)
                token = page.next_token
                if token is None:
                    return found

        from cirrusmq_broker.storage import log_index

        calls: Counter[str] = Counter()
        size_of = {
            ("t", int(i["stream"]["S"].rsplit("#", 1)[1]), int(i["base_offset"]["N"])): s
            for i, s in zip(items, sizes, strict=True)
        }
        original_query = log_index.LogIndex.stored_newest_first

        def measured(self: Any, *a: Any, **kw: Any) -> Any:
            """The index query, and the read units its items take."""
            page, after = original_query(self, *a, **kw)
            read = sum(size_of.get((e.topic, e.queue, e.base_offset), 0) for e, _ in page)
            units.append(0.5 * max(1, math.ceil(read / 4096)))
            return page, after

        log_index.LogIndex.stored_newest_first = measured  # type: ignore[method-assign]
        remove = observe_calls(observe)
        try:
            hit_found = lookup(wanted)
            hit_calls, hit_units = Counter(calls), sum(units)
            calls.clear()
            units.clear()
            for _ in range(args.probes):
                assert lookup(f"absent-{rng.getrandbits(64):x}") == 0
            miss_calls, miss_units = Counter(calls), sum(units)
        finally:
            remove()
            log_index.LogIndex.stored_newest_first = original_query  # type: ignore[method-assign]

    hours = (end - start) / 3_600_000
    print(
        f"stored: {len(items)} batches over {hours:.2f} h on {QUEUES} queues, "
        f"{args.keys_per_batch} distinct keys per batch; index item "
        f"{sum(sizes) / len(sizes):.0f} B on average, key filter "
        f"{sum(len(f or b'') for f in filters) / len(filters):.0f} B"
    )
    print(
        f"false positives: {false_positives} of {checks} checks = "
        f"{100 * false_positives / checks:.3f} % (theory for 10 bits per key, 7 hashes: 0.819 %)"
    )

    def report(label: str, found: int, counted: Counter[str], read_units: float, n: int) -> None:
        queries = counted["dynamodb:Query"] / n
        gets = counted["s3:GetObject"] / n
        cost = (read_units / n) * READ_UNIT_PRICE + gets * GET_PRICE
        print(
            f"{label}: found {found}; per lookup per hour searched: {queries / hours:.1f} "
            f"queries, {read_units / n / hours:.1f} read units, {gets / hours:.2f} S3 GETs "
            f"= ${cost / hours:.8f} (${cost / hours * 1e6:.2f} per million lookup-hours)"
        )

    report("key held by 1 message", hit_found, hit_calls, hit_units, 1)
    report(f"absent key (mean of {args.probes})", 0, miss_calls, miss_units, args.probes)
    other = sorted(set(hit_calls) | set(miss_calls))
    print("calls seen:", ", ".join(f"{c} {hit_calls[c] + miss_calls[c]}" for c in other))


if __name__ == "__main__":
    main()
