"""AWS calls of transactional messages, counted on in-process moto (the counts do not depend
on the server): register, half sends, commit, rollback, a back-check round.

    python tests/benchmarks/transactions.py [--transactions N]

Prints calls per operation (warm caches: the topic and queue heads already read once) and
the calls per 1,000 messages for transactions of 1 and of 10 messages.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for sub in ("layers/broker", "layers/api", "infra", "sdk"):
    sys.path.insert(0, str(ROOT / sub))

from cirrusmq_broker.container import Broker  # noqa: E402
from cirrusmq_broker.model import MessageInput  # noqa: E402
from cirrusmq_broker.rules.transaction_state import CheckTimings, Resolution  # noqa: E402
from cirrusmq_broker.storage.clients import observe_calls  # noqa: E402
from cirrusmq_local.in_process import broker_settings  # noqa: E402
from moto import mock_aws  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000_000

    def __call__(self) -> int:
        return self.now


def make_broker(clock: Clock) -> Broker:
    settings = broker_settings(
        ROOT / "template.yaml", tables={"transactions_table": "TransactionsTable"}
    )
    return Broker(settings, clock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=20)
    args = parser.parse_args()
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    seen: Counter[str] = Counter()
    observe_calls(lambda service, op, _p: seen.update([f"{service}.{op}"]))
    with mock_aws():
        clock = Clock()
        broker = make_broker(clock)
        broker.admin.create_topic("pay", queues=4, message_type="TRANSACTION")
        txns = broker.transactions

        def measure(label: str, action) -> Counter[str]:
            seen.clear()
            action()
            calls = Counter(seen)
            print(f"{label:<48} {sum(calls.values()):>3}  {dict(sorted(calls.items()))}")
            return calls

        print(f"{'operation':<48} calls")
        measure("register", lambda: txns.register("pg", "p1"))

        def send(txid: str, n: int = 1, part: int = 0) -> None:
            txns.send(
                "pg",
                txid,
                transactional_id="p1",
                epoch=1,
                topic_name="pay",
                inputs=[MessageInput(b"x" * 100) for _ in range(n)],
                part=part,
                timings=CheckTimings(6, 30, 15),
            )

        send("warm")  # topic and queue heads cached, as in a warm Lambda
        txns.end("pg", "warm", Resolution.COMMIT, producer=("p1", 1))
        one = measure("half send (1 message, 1 queue)", lambda: send("t1"))
        one += measure(
            "commit (1 half object: CopyObject)",
            lambda: txns.end("pg", "t1", Resolution.COMMIT, producer=("p1", 1)),
        )
        measure("half send (10 messages, 1 queue)", lambda: send("t10", 10))
        measure(
            "commit (10 messages)",
            lambda: txns.end("pg", "t10", Resolution.COMMIT, producer=("p1", 1)),
        )
        measure("3 half sends to 1 queue", lambda: [send("t3", 1, p) for p in range(3)])
        measure(
            "commit (3 halves merged: GET x3 + PUT)",
            lambda: txns.end("pg", "t3", Resolution.COMMIT, producer=("p1", 1)),
        )
        send("tr")
        measure("rollback", lambda: txns.end("pg", "tr", Resolution.ROLLBACK, producer=("p1", 1)))
        send("tc")
        clock.now += 7_000
        measure("checker pass (1 due, asked)", txns.run_checks)
        measure("checker pass (nothing due: 4 shard queries)", txns.run_checks)
        measure("producer poll taking the check", lambda: txns.poll_checks("pg", "p1", 1))
        measure(
            "answer UNKNOWN",
            lambda: txns.end("pg", "tc", Resolution.UNKNOWN, producer=("p1", 1), by="check"),
        )
        measure("idle producer poll (nothing pending)", lambda: txns._checks._take_checks("pg", 10))
        for size in (1, 10):
            total: Counter[str] = Counter()
            for i in range(args.transactions):
                send(f"warm{size}-{i}", size)  # every queue's head cached
                txns.end("pg", f"warm{size}-{i}", Resolution.COMMIT, producer=("p1", 1))
            for i in range(args.transactions):
                seen.clear()
                send(f"bulk{size}-{i}", size)
                txns.end("pg", f"bulk{size}-{i}", Resolution.COMMIT, producer=("p1", 1))
                total += seen
            per = sum(total.values()) / args.transactions
            print(
                f"{size}-message transactions (send + commit): {per:.1f} calls each = "
                f"{per * 1000 / size:,.0f} calls per 1,000 messages"
            )
        print("(a plain send of a batch to one queue: 2 calls)")


if __name__ == "__main__":
    main()
