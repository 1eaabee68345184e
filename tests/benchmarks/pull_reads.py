"""Pull / broadcast reads benchmark: AWS calls and HTTP requests per message read, per idle
poll, and per offset reset, through one ``LocalStack`` (moto server).

    python tests/benchmarks/pull_reads.py [--messages 2000] [--queues 8] [--batch 100]

1. Sends ``--messages`` messages of 1 KiB in batches of ``--batch`` to an ``--queues``-queue
   topic (round robin over the queues by message group).
2. A ``PullConsumer`` (``consume_from="earliest"``, ``max_poll_messages=100``) polls until it
   has read them all: HTTP requests and AWS calls (by operation) per 1,000 messages.
3. The same consumer idle: 20 polls of ``timeout=0`` (what a broadcast instance does each
   interval): HTTP requests and AWS calls per idle poll.
4. An offset reset of a group (``earliest``) after it received a batch: AWS calls per reset.

AWS calls are every call of the in-process handlers (``observe_calls``); the batch objects
are cached by the handler after the first read, as in a warm Lambda (each send of a batch
writes one object per queue it touches, so S3 GETs per message follow the batch layout).
Figures come from one run on this machine against moto: compare them as ratios; nothing is
timed.
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import httpx
from cirrusmq import Admin, Message, Producer, PullConsumer, SimpleConsumer
from cirrusmq.testing import LocalStack
from cirrusmq.transport import Transport
from cirrusmq_broker.storage.clients import observe_calls


class Tally:
    def __init__(self) -> None:
        self.aws: collections.Counter[str] = collections.Counter()
        self.http: collections.Counter[str] = collections.Counter()

    def on_aws(self, service: str, operation: str, _: dict) -> None:
        self.aws[f"{service}.{operation}"] += 1

    def on_http(self, request: httpx.Request) -> None:
        self.http[request.method] += 1

    def clear(self) -> None:
        self.aws.clear()
        self.http.clear()

    def report(self, title: str, per: float, unit: str) -> None:
        print(f"{title}: per {unit}")
        print(f"  HTTP requests {sum(self.http.values()) / per:.2f}")
        for name, count in sorted(self.aws.items()):
            note = "  (the request's nonce)" if name == "dynamodb.PutItem" else ""
            print(f"  {name:<32} {count / per:.2f}{note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--queues", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    tally = Tally()
    with LocalStack(schedules=False) as stack, tempfile.TemporaryDirectory() as folder:
        endpoint, credentials = stack.endpoint, stack.credentials
        with Admin(endpoint, credentials) as admin:
            admin.create_topic("bench", queues=args.queues)
        with Producer(endpoint, credentials) as producer:
            for start in range(0, args.messages, args.batch):
                producer.send_batch(
                    Message("bench", b"x" * 1024, keys=[f"k{i}"], message_group=f"g{i}")
                    for i in range(start, min(start + args.batch, args.messages))
                )
        remove = observe_calls(tally.on_aws)
        transport = Transport(endpoint, credentials, event_hooks={"request": [tally.on_http]})
        try:
            with PullConsumer(
                endpoint,
                credentials,
                "bench",
                offset_store_path=Path(folder) / "offsets.db",
                consume_from="earliest",
                max_poll_messages=100,
                transport=transport,
            ) as pull:
                pull.assign("bench")
                tally.clear()
                read = 0
                while read < args.messages:
                    read += len(pull.poll(1))
                pull.commit()
                tally.report(f"reading {read} messages by offset", read / 1000, "1,000 messages")
                tally.clear()
                for _ in range(20):
                    assert pull.poll(0) == []
                tally.report("idle polls", 20, "idle poll (one per interval)")
            with SimpleConsumer(endpoint, credentials, "rewound", {"bench": "*"}, 0) as consumer:
                consumer.receive(32)
            with Admin(endpoint, credentials, transport=transport) as admin:
                tally.clear()
                result = admin.reset_offsets("rewound", "bench", "earliest")
                tally.report(
                    f"offset reset of {len(result.queues)} queues "
                    f"({sum(q.dropped_leases for q in result.queues)} leases dropped)",
                    1,
                    "reset",
                )
        finally:
            transport.close()
            remove()


if __name__ == "__main__":
    main()
