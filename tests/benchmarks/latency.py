"""Latency benchmark: produce and end-to-end latency by batch size, local stack.

    python tests/benchmarks/latency.py [--rounds 20] [--batches 1,10,100,1000] [--json PATH]

One ``LocalStack`` (moto server), one signed HTTP client (core_queue.py's). Per batch size,
on a fresh 8-queue topic after the same uncounted warm-up as core_queue.py, ``--rounds``
times: a produce request of ``batch`` messages of 1 KiB is sent (its wall time is the
produce latency), then receives (``max_messages`` = batch, acks riding on the next receive)
run until all ``batch`` messages are back; end-to-end latency is the time from the start of
the produce request to the end of the receive that delivered the round's last message. Each
round starts on an empty topic, so nothing queues ahead of it.

These are wall times against moto on this machine: a handler's DynamoDB and S3 calls answer
in far more time here than in AWS. Compare batch sizes with each other, not with AWS.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from cirrusmq.testing import LocalStack
from core_queue import (
    BATCH_SIZES,
    CREDENTIALS,
    SIGNED,
    WARM_UP_SENDS,
    Client,
    latency_summary,
)


def warm_up(client: Client, topic: str) -> None:
    """Subscribe the group and create its state item on each queue (not timed)."""
    for _ in range(WARM_UP_SENDS):
        client.send(topic, 1)
    got, pending = 0, []
    while got < WARM_UP_SENDS:
        handles = client.receive("lat", topic, WARM_UP_SENDS, wait=1, ack=pending)
        if not handles:
            raise RuntimeError(f"warm-up of {topic}: received {got} of {WARM_UP_SENDS}")
        got, pending = got + len(handles), handles
    client.ack("lat", pending)


def one_round(client: Client, topic: str, batch: int) -> tuple[float, float]:
    """(produce s, end-to-end s) of one batch sent and received back."""
    started = time.perf_counter()
    client.send(topic, batch)
    produced = time.perf_counter() - started
    got, pending = 0, []
    while got < batch:
        handles = client.receive("lat", topic, batch, wait=1, ack=pending)
        if not handles and time.perf_counter() - started > 120:
            raise RuntimeError(f"batch {batch}: received {got} of {batch} in 120 s")
        got, pending = got + len(handles), handles
    end_to_end = time.perf_counter() - started
    if pending:
        client.ack("lat", pending)
    return produced, end_to_end


def run(client: Client, batches: tuple[int, ...], rounds: int) -> list[dict[str, Any]]:
    results = []
    for batch in batches:
        topic = f"lat-{batch}"
        client.create_topic(topic, 8)
        warm_up(client, topic)
        produce, e2e = [], []
        for _ in range(rounds):
            p, e = one_round(client, topic, batch)
            produce.append(p)
            e2e.append(e)
        results.append(
            {
                "batch": batch,
                "rounds": rounds,
                "produce": latency_summary(produce),
                "end_to_end": latency_summary(e2e),
            }
        )
        print(
            f"batch {batch:>4}: {rounds} rounds, produce p50"
            f" {results[-1]['produce']['p50_ms']:.0f} ms, end-to-end p50"
            f" {results[-1]['end_to_end']['p50_ms']:.0f} ms",
            file=sys.stderr,
        )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds per batch size")
    parser.add_argument(
        "--batches",
        type=lambda text: tuple(int(b) for b in text.split(",")),
        default=BATCH_SIZES,
        help="batch sizes, comma-separated (default 1,10,100,1000)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    with (
        LocalStack(
            schedules=False, preload_handlers=True, expire_interval=None, credentials=CREDENTIALS
        ) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
    ):
        results = run(Client(api), args.batches, args.rounds)
    print("batch | produce p50 / p99 ms | end-to-end p50 / p99 ms")
    for r in results:
        p, e = r["produce"], r["end_to_end"]
        print(
            f"{r['batch']:>5} | {p['p50_ms']:>8.0f} / {p['p99_ms']:<8.0f}"
            f" | {e['p50_ms']:>8.0f} / {e['p99_ms']:.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"batches": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
