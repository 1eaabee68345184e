"""Orderly consumption benchmark: FIFO messages through a local stack, orderly vs concurrent.

    python tests/benchmarks/orderly_bench.py [--messages 10000] [--groups 100] [--consumers 3]

Sends ``--messages`` over ``--groups`` message groups to a FIFO topic of 8 queues, then
consumes them with ``--consumers`` orderly push consumers (no-op listener) and prints
messages/s, the AWS calls made per 1,000 messages by operation, and the same for concurrent
push consumers on a NORMAL topic. One run on this machine (server and clients share its
cores): compare the rows as ratios.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import Counter

from cirrusmq import ConsumeResult, Message, MessageView, Producer, PushConsumer
from cirrusmq.testing import LocalStack
from cirrusmq_broker.storage.clients import observe_calls


def fill(stack: LocalStack, topic: str, messages: int, groups: int) -> None:
    batch = [
        Message(topic, f"k{i % groups}:{i}", message_group=f"k{i % groups}")
        for i in range(messages)
    ]
    with Producer(stack.endpoint, stack.credentials) as producer:
        for start in range(0, messages, 1000):
            producer.send_batch(batch[start : start + 1000])


def consume(
    stack: LocalStack, topic: str, messages: int, consumers: int, orderly: bool
) -> tuple[float, Counter]:
    done = Counter()
    lock = threading.Lock()
    finished = threading.Event()

    def listener(message: MessageView) -> ConsumeResult:
        with lock:
            done[message.message_id] += 1
            if len(done) >= messages:
                finished.set()
        return ConsumeResult.SUCCESS

    calls: Counter = Counter()
    remove = observe_calls(lambda service, operation, _: calls.update([f"{service}.{operation}"]))
    started = time.monotonic()
    group = f"bench-{'orderly' if orderly else 'concurrent'}-{int(started)}"
    running = [
        PushConsumer(
            stack.endpoint,
            stack.credentials,
            group,
            [topic],
            listener,
            orderly=orderly,
            consume_threads=8,
            receive_batch_size=64,
            invisible_duration_s=600,
            max_poll_interval_s=0.5,
            heartbeat_interval_s=5,
        ).start()
        for _ in range(consumers)
    ]
    finished.wait(600)
    seconds = time.monotonic() - started
    for consumer in running:
        consumer.shutdown()
    remove()
    return seconds, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--consumers", type=int, default=3)
    args = parser.parse_args()
    with LocalStack() as stack:
        from cirrusmq import Admin

        with Admin(stack.endpoint, stack.credentials) as admin:
            admin.create_topic("bench-fifo", queues=8, message_type="FIFO")
            admin.create_topic("bench-normal", queues=8)
        for name, topic, orderly in (
            ("orderly (FIFO)", "bench-fifo", True),
            ("concurrent (NORMAL)", "bench-normal", False),
        ):
            fill(stack, topic, args.messages, args.groups)
            seconds, calls = consume(stack, topic, args.messages, args.consumers, orderly)
            per_k = {op: round(n * 1000 / args.messages, 1) for op, n in calls.most_common()}
            print(
                f"{name:22s} {args.messages} messages, {args.consumers} consumers: "
                f"{seconds:6.1f} s, {args.messages / seconds:7.0f} msg/s"
            )
            print(f"  AWS calls per 1,000 messages: {per_k}")


if __name__ == "__main__":
    main()
