"""Delayed messages benchmark: lateness and AWS calls, local stack in real time.

    python tests/benchmarks/delays.py [--messages 1000] [--spread 60] [--batch 50]

A ``LocalStack`` with its schedules running, as ``cirrusmq dev`` runs it (the delay
scheduler works through each minute on the broker clock, which is wall time here). The
SDK's ``Producer`` sends ``--messages`` messages of 1 KiB in ``send_batch`` calls of
``--batch``, each with an absolute ``delivery_timestamp`` spread uniformly over
``--spread`` seconds starting 10 s after the sends; a ``SimpleConsumer`` (long polling)
receives and acks them. Nothing moves the clock.

Lateness: per message, the time the append transaction that made it visible returned
(``BatchAppender.append`` is wrapped in this process: queue + offsets -> commit time) minus
its ``delivery_timestamp``; also the time the consumer got it minus its due time (adds the
consumer's polling). Never early is checked: a commit that started before the due time
counts as early.

AWS calls: every call of the handlers (``observe_calls``), attributed to the function
running it (ProduceFunction: the delayed sends; SchedulerFunction: the moves, including
the ticks of its runs that found nothing due yet; ConsumeFunction is not counted). Prices
(us-east-1, list, 2025): DynamoDB on-demand $0.625 per million write units, $0.125 per
million read units (units estimated as 1 per item written, 2 inside a transaction; 1 per
consistent read of up to 4 KB); S3 PUT/DELETE/LIST $0.005 per 1,000, GET $0.0004 per
1,000; Lambda arm64 $0.0000133334 per GB-second (the scheduler: 256 MB, running while it
has work).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import secrets
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

from cirrusmq import Admin, FilterExpression, Message, Producer, SimpleConsumer
from cirrusmq.credentials import Credentials
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock
from cirrusmq_broker.storage.appends import BatchAppender
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_local.lambda_runtime import FunctionRuntime

CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
WRU, RRU = 0.625e-6, 0.125e-6
S3_PUT, S3_GET = 0.005e-3, 0.0004e-3
GB_S = 0.0000133334
SCHEDULER_GB = 0.25

READS = ("dynamodb.Query", "dynamodb.GetItem", "dynamodb.Scan", "dynamodb.BatchGetItem")

_current = threading.local()


def _install_commit_clock(topic: str) -> tuple[dict[tuple[int, int], tuple[int, int]], callable]:
    """(queue, offset) -> (commit started, commit returned) in broker ms, for ``topic``."""
    commits: dict[tuple[int, int], tuple[int, int]] = {}
    original = BatchAppender.append

    def append(self, batches, **kwargs):  # noqa: ANN001, ANN003, ANN202
        started = clock.now_ms()
        bases = original(self, batches, **kwargs)
        done = clock.now_ms()
        for batch in batches:
            if batch.topic == topic:
                for offset in range(bases[batch.queue], bases[batch.queue] + batch.count):
                    commits[(batch.queue, offset)] = (started, done)
        return bases

    BatchAppender.append = append
    return commits, lambda: setattr(BatchAppender, "append", original)


def _install_meter() -> tuple[collections.Counter, dict[str, int], callable]:
    """Count AWS calls per (function, call) and DynamoDB items written per function."""
    calls: collections.Counter = collections.Counter()
    writes: dict[str, int] = collections.Counter()
    original = FunctionRuntime.invoke

    def invoke(self, event):  # noqa: ANN001, ANN202
        _current.function = self.logical_id
        try:
            return original(self, event)
        finally:
            _current.function = None

    def observer(service: str, operation: str, params: dict) -> None:
        thread = threading.current_thread().name
        function = getattr(_current, "function", None) or "other"
        if "SchedulerFunction" in thread or thread.startswith(("delay-", "cirrusmq-run-due")):
            function = "SchedulerFunction"  # its invocations run in the schedule's threads
        calls[(function, f"{service}.{operation}")] += 1
        if operation == "TransactWriteItems":
            writes[function] += 2 * len(params.get("TransactItems", []))
        elif operation in ("PutItem", "UpdateItem", "DeleteItem"):
            writes[function] += 1

    FunctionRuntime.invoke = invoke
    remove = observe_calls(observer)

    def undo() -> None:
        FunctionRuntime.invoke = original
        remove()

    return calls, writes, undo


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--spread", type=float, default=60.0, help="seconds the dues span")
    parser.add_argument("--batch", type=int, default=50, help="messages per send request")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    with LocalStack(schedules=True, credentials=CREDENTIALS, preload_handlers=True) as stack:
        calls, writes, undo = _install_meter()
        topic, group = f"delays-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        commits, undo_commits = _install_commit_clock(topic)
        with Admin(stack.endpoint, CREDENTIALS) as admin:
            admin.create_topic(topic, queues=8)
        body = b"x" * 1024
        start = clock.now_ms() + 10_000
        dues = [start + int(random.uniform(0, args.spread * 1000)) for _ in range(args.messages)]
        sent_at = time.monotonic()
        with Producer(stack.endpoint, CREDENTIALS) as producer:
            receipts = []
            for i in range(0, args.messages, args.batch):
                receipts += producer.send_batch(
                    [Message(topic, body, delivery_timestamp=d) for d in dues[i : i + args.batch]]
                )
        send_s = time.monotonic() - sent_at
        if clock.now_ms() >= start:
            print(f"sending took {send_s:.1f} s, past the first due time: use fewer messages")
            return 1
        due_of = {r.message_id: r.delivery_timestamp for r in receipts}
        moved, seen, early = {}, {}, []
        with SimpleConsumer(
            stack.endpoint, CREDENTIALS, group, {topic: FilterExpression.ALL}, await_duration=2
        ) as consumer:
            deadline = time.monotonic() + (max(dues) - clock.now_ms()) / 1000 + 120
            while len(seen) < len(due_of) and time.monotonic() < deadline:
                got = consumer.receive(1000, 60)
                now = clock.now_ms()
                for m in got:
                    started, done = commits[(m.queue, m.offset)]
                    moved[m.message_id] = done - due_of[m.message_id]
                    if started < due_of[m.message_id]:
                        early.append(m.message_id)
                    seen.setdefault(m.message_id, now - due_of[m.message_id])
                if got:
                    consumer.ack_batch(got)
        run_minutes = (clock.now_ms() - start + 10_000) / 60_000
        undo()
        undo_commits()
        items = stack.boto3_client("dynamodb").scan(TableName=stack.resources["TimersTable"])
        pending = sum(1 for i in items["Items"] if "object_key" in i)
        timer_objects = stack.boto3_client("s3").list_objects_v2(
            Bucket=stack.resources["MessageBucket"], Prefix="timers/"
        )
        print(f"left: {pending} timer items, {timer_objects.get('KeyCount', 0)} timer objects")
    print(
        f"delayed messages: {args.messages} of 1 KiB, dues spread over {args.spread:.0f} s, "
        f"sent in requests of {args.batch} ({send_s:.1f} s)"
    )
    print(f"received {len(seen)}/{len(due_of)}")
    for name, values in (("visible (commit - due)", moved), ("received (got - due)", seen)):
        v = list(values.values())
        if v:
            print(
                f"lateness {name:<24} p50 {percentile(v, 0.5):6.0f} ms  p99 "
                f"{percentile(v, 0.99):6.0f} ms  max {max(v):6.0f} ms  "
                f"mean {statistics.mean(v):.0f} ms"
            )
    print(f"early deliveries: {len(early)}")
    lateness = {}
    for name, values in (("visible", moved), ("received", seen)):
        v = list(values.values())
        lateness[name] = (
            {"p50_ms": percentile(v, 0.5), "p99_ms": percentile(v, 0.99), "max_ms": max(v)}
            if v
            else None
        )
    per = 1000 / args.messages
    total_cost = 0.0
    for function in ("ProduceFunction", "SchedulerFunction"):
        rows = sorted((op, n) for (fn, op), n in calls.items() if fn == function)
        print(f"{function}: AWS calls per 1,000 delayed messages")
        cost = writes[function] * per * WRU
        for op, n in rows:
            print(f"  {op:<32} {n * per:8.1f}")
            if (
                op.startswith("dynamodb.")
                and op.split(".")[1] in ("Query", "GetItem", "Scan")
                or op == "dynamodb.BatchGetItem"
            ):
                cost += n * per * RRU
            elif op in ("s3.PutObject", "s3.DeleteObjects", "s3.ListObjectsV2"):
                cost += n * per * S3_PUT
            elif op in ("s3.GetObject", "s3.HeadObject"):
                cost += n * per * S3_GET
        print(
            f"  write units ~{writes[function] * per:.0f}; requests ${cost:.6f} per 1,000 "
            f"(${cost * 1000:.2f} per million)"
        )
        total_cost += cost
    idle = sum(n for (fn, op), n in calls.items() if fn == "SchedulerFunction")
    print(f"scheduler: {idle} calls in {run_minutes:.1f} min (ticks query every second)")
    lam = run_minutes * 60 * SCHEDULER_GB * GB_S
    print(
        f"requests total ${total_cost:.6f} per 1,000 delayed messages; the scheduler's "
        f"Lambda time while it had work (256 MB, {run_minutes:.1f} min) ${lam:.4f}; "
        "at rest it returns after one look: tests/benchmarks/at_rest.py"
    )
    if args.json:
        data = {
            "messages": args.messages,
            "spread_s": args.spread,
            "received": len(seen),
            "early": len(early),
            "lateness": lateness,
            "requests_per_million": total_cost * 1000,
        }
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0 if not early and len(seen) == len(due_of) else 1


if __name__ == "__main__":
    sys.exit(main())
