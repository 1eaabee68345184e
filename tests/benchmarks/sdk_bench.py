"""SDK benchmark: messages/second through a local stack, with the requests each phase made.

    python tests/benchmarks/sdk_bench.py [--messages 10000] [--body-bytes 256]

Phases (each on its own topic, each bounded by ``--phase-seconds``):

- ``send`` blocking, one thread: one request per message (the latency floor);
- ``send`` blocking, 16 threads: concurrent callers share batches;
- ``send_async`` + ``flush``: per-topic batching up to ``max_batch_messages``;
- ``AsyncProducer.send_async``: the same on asyncio;
- ``PushConsumer`` (8 threads, no-op listener) consuming what ``send_async`` produced, acks
  batched.

Figures come from one run on this machine, server and client sharing its cores: compare them
as ratios. The whole run stays well under two minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from cirrusmq import (
    Admin,
    AsyncProducer,
    ConsumeResult,
    Message,
    MessageView,
    Producer,
    PushConsumer,
)
from cirrusmq.testing import LocalStack
from cirrusmq.transport import AsyncTransport, Transport


@dataclass
class Result:
    phase: str
    messages: int
    seconds: float
    requests: int

    def row(self) -> str:
        rate = self.messages / self.seconds if self.seconds else 0.0
        per_request = self.messages / self.requests if self.requests else 0.0
        return (
            f"{self.phase:<34} {self.messages:>8} {self.seconds:>8.2f} {rate:>10.0f} "
            f"{self.requests:>9} {per_request:>9.1f}"
        )


class Requests:
    """Counts requests by path (an httpx event hook, sync and async)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> None:
        with self._lock:
            self.counts[request.url.path] += 1

    async def on_async(self, request: httpx.Request) -> None:
        self(request)

    def matching(self, suffix: str) -> int:
        return sum(n for path, n in self.counts.items() if path.endswith(suffix))


def bench_send_blocking(stack, topic: str, body: bytes, budget_s: float, threads: int) -> Result:
    requests = Requests()
    transport = Transport(stack.endpoint, stack.credentials, event_hooks={"request": [requests]})
    sent = 0
    lock = threading.Lock()
    with Producer(stack.endpoint, stack.credentials, transport=transport) as producer:
        started = time.perf_counter()
        deadline = started + budget_s

        def worker() -> None:
            nonlocal sent
            while time.perf_counter() < deadline:
                producer.send(Message(topic, body))
                with lock:
                    sent += 1

        with ThreadPoolExecutor(threads) as pool:
            for _ in range(threads):
                pool.submit(worker)
        elapsed = time.perf_counter() - started
    transport.close()
    name = f"send (blocking, {threads} thread{'s' if threads > 1 else ''})"
    return Result(name, sent, elapsed, requests.matching("/messages"))


def bench_send_async(stack, topic: str, body: bytes, count: int) -> Result:
    requests = Requests()
    transport = Transport(stack.endpoint, stack.credentials, event_hooks={"request": [requests]})
    with Producer(stack.endpoint, stack.credentials, transport=transport) as producer:
        started = time.perf_counter()
        futures = [producer.send_async(Message(topic, body)) for _ in range(count)]
        producer.flush()
        elapsed = time.perf_counter() - started
        assert all(f.result().offset is not None for f in futures)
    transport.close()
    return Result("send_async + flush", count, elapsed, requests.matching("/messages"))


def bench_async_producer(stack, topic: str, body: bytes, count: int) -> Result:
    requests = Requests()

    async def run() -> float:
        transport = AsyncTransport(
            stack.endpoint, stack.credentials, event_hooks={"request": [requests.on_async]}
        )
        async with AsyncProducer(stack.endpoint, stack.credentials, transport=transport) as p:
            started = time.perf_counter()
            futures = [await p.send_async(Message(topic, body)) for _ in range(count)]
            await p.flush()
            elapsed = time.perf_counter() - started
            await asyncio.gather(*futures)
        await transport.close()
        return elapsed

    elapsed = asyncio.run(run())
    return Result(
        "AsyncProducer.send_async + flush", count, elapsed, requests.matching("/messages")
    )


def bench_push_consumer(stack, topic: str, count: int, budget_s: float) -> Result:
    requests = Requests()
    transport = Transport(stack.endpoint, stack.credentials, event_hooks={"request": [requests]})
    done = threading.Event()
    consumed = 0
    lock = threading.Lock()

    def listener(message: MessageView) -> ConsumeResult:
        nonlocal consumed
        with lock:
            consumed += 1
            if consumed >= count:
                done.set()
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(
        stack.endpoint,
        stack.credentials,
        "bench-push",
        [topic],
        listener,
        consume_threads=8,
        receive_batch_size=256,
        transport=transport,
    )
    started = time.perf_counter()
    consumer.start()
    done.wait(budget_s)
    elapsed = time.perf_counter() - started
    consumer.shutdown()
    transport.close()
    calls = requests.matching("/receive") + requests.matching("/ack")
    name = f"PushConsumer ({requests.matching('/ack')} acks)"
    return Result(name, consumed, elapsed, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10_000, help="for the async phases")
    parser.add_argument("--body-bytes", type=int, default=256)
    parser.add_argument("--phase-seconds", type=float, default=5.0, help="blocking phases")
    args = parser.parse_args()
    body = b"x" * args.body_bytes

    with LocalStack(schedules=False) as stack, Admin(stack.endpoint, stack.credentials) as admin:
        for name in ("bench-send", "bench-send-mt", "bench-async", "bench-aio"):
            admin.create_topic(name)
        results = [
            bench_send_blocking(stack, "bench-send", body, args.phase_seconds, threads=1),
            bench_send_blocking(stack, "bench-send-mt", body, args.phase_seconds, threads=16),
            bench_send_async(stack, "bench-async", body, args.messages),
            bench_async_producer(stack, "bench-aio", body, args.messages),
            bench_push_consumer(stack, "bench-async", args.messages, budget_s=60),
        ]
    print(f"CirrusMQ SDK through a local stack: {args.body_bytes}-byte bodies")
    print(
        f"{'phase':<34} {'messages':>8} {'seconds':>8} {'msg/s':>10} {'requests':>9} {'msg/req':>9}"
    )
    for result in results:
        print(result.row())
    print("(PushConsumer requests = receives + acks)")


if __name__ == "__main__":
    main()
