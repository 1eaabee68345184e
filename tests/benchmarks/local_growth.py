"""Does the local stack slow down as it fills? Produce p50 latency at the start and after N batches.

    .venv/bin/python tests/benchmarks/local_growth.py [--batches 30000] [--threads 4]

Each measurement is a sequential window of ``--window`` HTTP sends of a 1-message batch
through a LocalStack (nothing else running); between them, ``--threads`` senders fill the
topic. Prints p50/p90 of every window (also every ``--every`` batches), the fill rate, and
the ratio of the last p50 to the first. The target: at most 2x after 30,000 batches.
"""

from __future__ import annotations

import argparse
import base64
import secrets
import statistics
import sys
import threading
import time

import httpx
from cirrusmq.credentials import Credentials
from cirrusmq.signing import CirrusAuth
from cirrusmq.testing import LocalStack

BODY = base64.b64encode(b"x" * 256).decode()


CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
"""The local stack's bootstrap admin key (given to it at start)."""
SIGNED = CirrusAuth(CREDENTIALS)
"""Signs every request (the API refuses unsigned ones)."""


def send(api: httpx.Client, topic: str) -> float:
    started = time.perf_counter()
    response = api.post(f"/v1/topics/{topic}/messages", json={"messages": [{"body": BODY}]})
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    return elapsed


def window(api: httpx.Client, topic: str, size: int) -> tuple[float, float]:
    """p50 and p90 (ms) of ``size`` sequential sends."""
    latencies = sorted(send(api, topic) for _ in range(size))
    return statistics.median(latencies) * 1000, latencies[int(len(latencies) * 0.9)] * 1000


def fill(endpoint: str, topic: str, count: int, threads: int) -> tuple[float, int]:
    """Send ``count`` batches from ``threads`` threads; return batches per second and the
    number of 5xx answers (retried; more than 1% of ``count`` aborts)."""
    remaining = [count]
    lock = threading.Lock()
    errors: list[BaseException] = []
    failures = [0]

    def worker() -> None:
        with httpx.Client(base_url=endpoint, timeout=120, auth=SIGNED) as api:
            while True:
                with lock:
                    if remaining[0] <= 0 or errors:
                        return
                    remaining[0] -= 1
                try:
                    send(api, topic)
                except httpx.HTTPStatusError as exc:
                    with lock:
                        failures[0] += 1
                        remaining[0] += 1
                        if exc.response.status_code < 500 or failures[0] > count // 100:
                            errors.append(exc)
                except BaseException as exc:  # noqa: BLE001 - reported by the caller
                    errors.append(exc)
                    return

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise errors[0]
    return count / (time.perf_counter() - started), failures[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batches", type=int, default=30_000)
    parser.add_argument("--every", type=int, default=10_000, help="measure every N batches")
    parser.add_argument("--window", type=int, default=200)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--queues", type=int, default=8)
    args = parser.parse_args()

    with (
        LocalStack(schedules=False, preload_handlers=True, credentials=CREDENTIALS) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
    ):
        print(f"stack {stack.endpoint}, moto {stack.aws_endpoint} (pid {stack._moto.pid})")  # noqa: SLF001
        topic = f"growth-{time.time_ns()}"
        api.post("/v1/topics", json={"name": topic, "queues": args.queues}).raise_for_status()
        for _ in range(100):  # warm up: handlers imported, clients made
            send(api, topic)
        sent, first = 0, window(api, topic, args.window)
        sent += args.window
        print(f"{sent:>7} batches  p50 {first[0]:7.1f} ms  p90 {first[1]:7.1f} ms", flush=True)
        last = first
        while sent < args.batches:
            step = min(args.every, args.batches - sent)
            rate, failures = fill(stack.endpoint, topic, step, args.threads)
            sent += step
            last = window(api, topic, args.window)
            sent += args.window
            print(
                f"{sent:>7} batches  p50 {last[0]:7.1f} ms  p90 {last[1]:7.1f} ms"
                f"  (fill {rate:.0f} batches/s with {args.threads} threads, {failures} 5xx)",
                flush=True,
            )
        ratio = last[0] / first[0]
        verdict = "OK" if ratio <= 2 else "above the 2x target"
        print(f"p50 start {first[0]:.1f} ms, after {sent} batches {last[0]:.1f} ms: ", end="")
        print(f"{ratio:.2f}x ({verdict})")
    sys.exit(0)


if __name__ == "__main__":
    main()
