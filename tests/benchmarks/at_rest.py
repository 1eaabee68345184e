"""At-rest benchmark: what a deployment with no traffic costs in calls, counted.

    python tests/benchmarks/at_rest.py [--minutes 60]

A ``LocalStack`` with its schedules, as ``cirrusmq dev`` runs it, with topics but no
traffic: its time is advanced one minute at a time (``advance_time(60)``: every schedule
that became due runs once, as EventBridge would fire it), ``--minutes`` times. Every AWS
call the handlers make is counted (``observe_calls``) and attributed to the function
running it, with each function's invocations and in-process run time.

The monthly figure is those counts scaled to 30 days at list prices (us-east-1, taken on
2026-11-26): DynamoDB on-demand $0.625 per million write units and $0.125 per million read
units (1 per call here: every item is small), S3 PUT/LIST/DELETE $0.005 per 1,000 and GET
$0.0004 per 1,000, Lambda $0.20 per million requests and $0.0000133334 per GB-second
(arm64), billed duration estimated from the in-process run time (moto answers in about the
time DynamoDB does; a cold start is not counted).
"""

from __future__ import annotations

import argparse
import collections
import secrets
import sys
import threading
import time
import uuid

from cirrusmq import Admin
from cirrusmq.credentials import Credentials
from cirrusmq.testing import LocalStack
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_local.lambda_runtime import FunctionRuntime

CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
PRICES_DATE = "2026-11-26"
WRU, RRU = 0.625e-6, 0.125e-6
S3_PUT, S3_GET = 0.005e-3, 0.0004e-3
LAMBDA_REQUEST, GB_S = 0.20e-6, 0.0000133334
MINUTES_A_MONTH = 60 * 24 * 30
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
READS = ("Query", "GetItem", "Scan", "BatchGetItem")

_current = threading.local()


class Meter:
    """AWS calls per (function, call); invocations and run seconds per function."""

    def __init__(self) -> None:
        self.calls: collections.Counter = collections.Counter()
        self.invocations: collections.Counter = collections.Counter()
        self.seconds: collections.Counter = collections.Counter()
        self.memory_mb: dict[str, int] = {}
        self._original = FunctionRuntime.invoke
        meter, original = self, self._original

        def invoke(runtime, event):  # noqa: ANN001, ANN202
            _current.function = runtime.logical_id
            started = time.monotonic()
            try:
                return original(runtime, event)
            finally:
                meter.invocations[runtime.logical_id] += 1
                meter.seconds[runtime.logical_id] += time.monotonic() - started
                meter.memory_mb[runtime.logical_id] = runtime.function.memory_size
                _current.function = None

        FunctionRuntime.invoke = invoke
        self._remove = observe_calls(self._observe)

    def _observe(self, service: str, operation: str, _: object) -> None:
        function = getattr(_current, "function", None)
        if function is None and threading.current_thread().name.startswith("delay-"):
            function = "SchedulerFunction"  # its due-minute queries run in its pool
        self.calls[(function or "other", f"{service}.{operation}")] += 1

    def close(self) -> None:
        FunctionRuntime.invoke = self._original
        self._remove()


def request_cost(operation: str, n: float) -> float:
    service, name = operation.split(".", 1)
    if service == "dynamodb":
        return n * (WRU if name in WRITES else RRU if name in READS else 0)
    if service == "s3":
        return n * (S3_GET if name in ("GetObject", "HeadObject") else S3_PUT)
    return 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=60, help="idle minutes simulated")
    parser.add_argument("--topics", type=int, default=3, help="topics created first")
    args = parser.parse_args(argv)
    with LocalStack(schedules=True, credentials=CREDENTIALS, preload_handlers=True) as stack:
        with Admin(stack.endpoint, CREDENTIALS) as admin:
            for _ in range(args.topics):
                admin.create_topic(f"idle-{uuid.uuid4().hex[:8]}", queues=8)
        stack.advance_time(60)  # the first runs after the start read their checkpoints
        meter = Meter()
        try:
            for _ in range(args.minutes):
                stack.advance_time(60)
        finally:
            meter.close()
    scale = MINUTES_A_MONTH / args.minutes
    print(f"at rest: {args.minutes} idle minutes, {args.topics} topics, prices of {PRICES_DATE}")
    total = 0.0
    for function in sorted(meter.invocations):
        runs = meter.invocations[function]
        calls = {op: n for (fn, op), n in meter.calls.items() if fn == function}
        per_run = sum(calls.values()) / runs
        requests = sum(request_cost(op, n) for op, n in calls.items()) * scale
        seconds = meter.seconds[function] / runs
        gb = meter.memory_mb[function] / 1024
        lam = runs * scale * (LAMBDA_REQUEST + seconds * gb * GB_S)
        total += requests + lam
        listed = ", ".join(f"{op} {n / runs:.2f}" for op, n in sorted(calls.items()))
        print(
            f"{function}: {runs / args.minutes:.2f} runs a minute, {per_run:.2f} AWS calls a "
            f"run ({listed}), {seconds * 1000:.0f} ms a run at {meter.memory_mb[function]} MB"
        )
        print(f"  a month: requests ${requests:.3f}, Lambda ${lam:.3f}")
    other = sum(n for (fn, _), n in meter.calls.items() if fn == "other")
    print(f"calls outside a function: {other}")
    print(f"at rest a month: ${total:.2f} (scheduled functions; storage not included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
