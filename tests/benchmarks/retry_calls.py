"""AWS calls of retries: one retry publish, an idle poll before/after a retry topic.

    python tests/benchmarks/retry_calls.py

Runs the broker in-process on moto (``moto.mock_aws``, tables and bucket from template.yaml)
with a fake clock, and counts every AWS call through
``cirrusmq_broker.storage.clients.observe_calls``. Warm container: caches filled as they
would be after the first requests. Prints per scenario the calls by operation.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    for part in ("layers/broker", "layers/api", "infra", "sdk"):
        sys.path.insert(0, str(ROOT / part))
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.model import MessageInput
    from cirrusmq_broker.storage.clients import observe_calls
    from cirrusmq_local.in_process import broker_settings
    from moto import mock_aws

    def count(action: Callable[[], object]) -> Counter[str]:
        calls: Counter[str] = Counter()
        remove = observe_calls(lambda service, op, _: calls.update([f"{service}:{op}"]))
        try:
            action()
        finally:
            remove()
        return calls

    def show(label: str, calls: Counter[str]) -> None:
        detail = ", ".join(f"{op} {n}" for op, n in sorted(calls.items()))
        print(f"{label:<58} {sum(calls.values()):>3} calls: {detail}")

    now = [1_790_000_000_000]
    with mock_aws():
        settings = broker_settings(
            ROOT / "template.yaml", receipt_secret="benchmark-secret-0123456789abcdef"
        )
        broker = Broker(settings, lambda: now[0])

        def advance(seconds: float) -> None:
            now[0] += int(seconds * 1000)

        def drain() -> None:
            for _ in range(20):
                got = broker.consume.receive("g", "t", max_messages=100)
                if got:
                    broker.consume.ack("g", [m.receipt_handle for m in got])

        broker.admin.create_topic("t", queues=8)
        broker.produce.send("t", [MessageInput(b"x")] * 10)
        drain()
        advance(60)
        drain()  # bounds made exact again after the acks
        show("idle poll, no retry topic", count(lambda: broker.consume.receive("g", "t")))
        advance(6)
        show(
            "idle poll, no retry topic, 5 s later (topic lookup cached 30 s)",
            count(lambda: broker.consume.receive("g", "t")),
        )
        broker.produce.send("t", [MessageInput(b"a")] * 10)
        got = broker.consume.receive("g", "t", max_messages=10, invisible_seconds=10)
        show(
            "nack of 10 messages (first retry: creates the topic)",
            count(lambda: broker.retries.nack("g", [m.receipt_handle for m in got])),
        )
        broker.produce.send("t", [MessageInput(b"b")] * 10)
        got = broker.consume.receive("g", "t", max_messages=10, invisible_seconds=10)
        show(
            "nack of 10 messages (one retry publish)",
            count(lambda: broker.retries.nack("g", [m.receipt_handle for m in got])),
        )
        advance(3600)
        drain()
        broker.produce.send("t", [MessageInput(b"c")] * 10)
        got = broker.consume.receive("g", "t", max_messages=10, invisible_seconds=10)
        advance(10)
        show(
            "receive finding 1 expired lease of 10 (one retry publish)",
            count(lambda: broker.consume.receive("g", "t", max_messages=1)),
        )
        advance(3600)
        drain()
        advance(60)
        drain()
        show("idle poll, retry topic exists", count(lambda: broker.consume.receive("g", "t")))
        advance(6)
        show(
            "idle poll, retry topic exists, 5 s later (its check)",
            count(lambda: broker.consume.receive("g", "t")),
        )


if __name__ == "__main__":
    main()
