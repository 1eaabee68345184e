"""Core queue benchmark: throughput and AWS calls per 1,000 messages through the local stack.

    python tests/benchmarks/core_queue.py [--messages 1000]

For batch sizes 1, 10 and 100 it produces N messages over HTTP, then receives and acks them
all (max_messages = batch size), counting every AWS call the handlers make (botocore
``before-call`` events) and timing both phases. Then it does the same with SQS emulated by
the same moto server (batches capped at SQS's 10), and prints a request-cost estimate at
AWS list prices. All figures come from one run on this machine; compare them as ratios.
"""

from __future__ import annotations

import argparse
import base64
import collections
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field

import httpx
from cirrusmq.testing import LocalStack
from cirrusmq_broker.storage.clients import observe_calls

BATCH_SIZES = (1, 10, 100)
BODY = base64.b64encode(b"x" * 256).decode()

# us-east-1 list prices (USD), for the request-cost estimate.
PRICE = {
    "s3_put": 0.005 / 1000,
    "s3_get": 0.0004 / 1000,
    "ddb_write_unit": 0.625 / 1_000_000,
    "ddb_read_unit": 0.125 / 1_000_000,
    "api_request": 1.00 / 1_000_000,  # HTTP API
    "lambda_request": 0.20 / 1_000_000,
    "sqs_request": 0.40 / 1_000_000,
}
DDB_READS = {"GetItem", "BatchGetItem", "Query", "Scan"}
DDB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}


@dataclass
class CallCounter:
    """Counts AWS calls by kind, and DynamoDB capacity units.

    Units are a floor: one per item read or written (two per transactional write), as if
    every item were under 1 KB (4 KB for reads); group state items can be larger.
    """

    calls: collections.Counter = field(default_factory=collections.Counter)
    write_units: int = 0
    read_units: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, service: str, operation: str, params: dict) -> None:
        with self.lock:
            if service == "s3":
                kind = {"PutObject": "S3 PUT", "GetObject": "S3 GET"}.get(operation, "S3 other")
            elif operation in DDB_READS:
                kind = "DynamoDB read"
                self.read_units += (
                    sum(len(v["Keys"]) for v in params["RequestItems"].values())
                    if operation == "BatchGetItem"
                    else 1
                )
            elif operation in DDB_WRITES:
                kind = "DynamoDB write"
                if operation == "TransactWriteItems":
                    self.write_units += 2 * len(params.get("TransactItems", ()))
                elif operation == "BatchWriteItem":
                    self.write_units += sum(len(v) for v in params["RequestItems"].values())
                else:
                    self.write_units += 1
            else:
                kind = f"{service} {operation}"
            self.calls[kind] += 1

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.write_units = self.read_units = 0


@dataclass
class Phase:
    messages: int
    requests: int
    seconds: float
    latencies: list[float]
    calls: dict[str, int]
    write_units: int
    read_units: int

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    def per_1000(self, kind: str) -> float:
        return 1000 * self.calls.get(kind, 0) / self.messages

    def cost_per_million(self) -> float:
        per_message = (
            self.calls.get("S3 PUT", 0) * PRICE["s3_put"]
            + self.calls.get("S3 GET", 0) * PRICE["s3_get"]
            + self.write_units * PRICE["ddb_write_unit"]
            + self.read_units * PRICE["ddb_read_unit"]
            + self.requests * (PRICE["api_request"] + PRICE["lambda_request"])
        ) / self.messages
        return per_message * 1_000_000


def timed(counter: CallCounter, work) -> Phase:
    counter.reset()
    latencies: list[float] = []
    started = time.perf_counter()
    messages, requests = work(latencies)
    seconds = time.perf_counter() - started
    return Phase(
        messages,
        requests,
        seconds,
        latencies,
        dict(counter.calls),
        counter.write_units,
        counter.read_units,
    )


def produce(api: httpx.Client, topic: str, total: int, batch: int):
    def work(latencies: list[float]) -> tuple[int, int]:
        sent = requests = 0
        while sent < total:
            size = min(batch, total - sent)
            t = time.perf_counter()
            r = api.post(f"/v1/topics/{topic}/messages", json={"messages": [{"body": BODY}] * size})
            latencies.append(time.perf_counter() - t)
            r.raise_for_status()
            sent, requests = sent + size, requests + 1
        return sent, requests

    return work


def consume(api: httpx.Client, topic: str, total: int, batch: int):
    def work(latencies: list[float]) -> tuple[int, int]:
        got = requests = 0
        while got < total:
            t = time.perf_counter()
            r = api.post(
                "/v1/groups/bench/receive",
                json={"topic": topic, "max_messages": batch, "wait_seconds": 1},
            )
            r.raise_for_status()
            messages = r.json()["messages"]
            if not messages:
                break
            a = api.post(
                "/v1/groups/bench/ack",
                json={"receipt_handles": [m["receipt_handle"] for m in messages]},
            )
            a.raise_for_status()
            latencies.append(time.perf_counter() - t)
            got, requests = got + len(messages), requests + 2
        return got, requests

    return work


def sqs_round(sqs, total: int, batch: int) -> tuple[float, float]:
    """(send msg/s, receive+delete msg/s) against moto's SQS, batches capped at 10."""
    url = sqs.create_queue(QueueName=f"bench-{batch}-{time.time_ns()}")["QueueUrl"]
    batch = min(batch, 10)
    started, sent = time.perf_counter(), 0
    while sent < total:
        size = min(batch, total - sent)
        if size == 1:
            sqs.send_message(QueueUrl=url, MessageBody="x" * 256)
        else:
            sqs.send_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "MessageBody": "x" * 256} for i in range(size)],
            )
        sent += size
    send_rate = sent / (time.perf_counter() - started)
    started, got = time.perf_counter(), 0
    while got < total:
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=batch, WaitTimeSeconds=1
        ).get("Messages", [])
        if not messages:
            break
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )
        got += len(messages)
    return send_rate, got / (time.perf_counter() - started)


def sqs_cost_per_million(batch: int) -> float:
    requests_per_message = 3 / min(batch, 10)  # send + receive + delete, batched
    return requests_per_message * PRICE["sqs_request"] * 1_000_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages per batch size")
    args = parser.parse_args(argv)
    counter = CallCounter()
    remove = observe_calls(counter)
    rows = []
    with (
        LocalStack(schedules=False) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=60) as api,
    ):
        sqs = stack.boto3_client("sqs")
        for batch in BATCH_SIZES:
            topic = f"bench-{batch}"
            api.post("/v1/topics", json={"name": topic, "queues": 8}).raise_for_status()
            p = timed(counter, produce(api, topic, args.messages, batch))
            c = timed(counter, consume(api, topic, args.messages, batch))
            sqs_send, sqs_recv = sqs_round(sqs, args.messages, batch)
            rows.append((batch, p, c, sqs_send, sqs_recv))
            print(f"batch {batch:>3}: done", file=sys.stderr)
    remove()

    print(
        f"\nCirrusMQ core queue benchmark — {args.messages} messages of 256 B per batch size,"
        " one client, local stack (moto server)\n"
    )
    print(
        f"{'batch':>5} | {'produce msg/s':>13} | {'p50 send ms':>11} | {'recv+ack msg/s':>14} |"
        f" {'SQS send msg/s':>14} | {'SQS recv+del msg/s':>18}"
    )
    for batch, p, c, ss, sr in rows:
        print(
            f"{batch:>5} | {p.rate:>13.1f} | {1000 * statistics.median(p.latencies):>11.1f} |"
            f" {c.rate:>14.1f} | {ss:>14.1f} | {sr:>18.1f}"
        )
    print("\nAWS calls per 1,000 messages (produce / receive+ack)")
    kinds = ["S3 PUT", "S3 GET", "DynamoDB read", "DynamoDB write"]
    print(f"{'batch':>5} | " + " | ".join(f"{k:>17}" for k in kinds))
    for batch, p, c, _, _ in rows:
        cells = [f"{p.per_1000(k):>7.1f} / {c.per_1000(k):>7.1f}" for k in kinds]
        print(f"{batch:>5} | " + " | ".join(cells))
    print("\nRequest cost per million messages (produce + consume), AWS list prices us-east-1:")
    print(
        "  S3 requests, DynamoDB on-demand units (items <= 1 KB assumed), HTTP API + Lambda"
        " requests (Lambda duration not included) vs SQS standard requests"
    )
    for batch, p, c, _, _ in rows:
        ours = p.cost_per_million() + c.cost_per_million()
        sqs_cost = sqs_cost_per_million(batch)
        print(
            f"  batch {batch:>3}: CirrusMQ ${ours:8.2f}   SQS ${sqs_cost:6.2f}"
            f"   ratio {ours / sqs_cost:5.1f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
