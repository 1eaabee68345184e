"""CPU time per request in a process that serves one function only, as on Lambda.

    python tests/benchmarks/function_process.py [--batch 1000] [--requests 30] [--not-lambda]

The local stack runs every function in one process. Here the front door's handler
(``FrontDoor=function-url``) runs in a worker process of its own: the local gateway hands
it each event and gets the result back, the rest of the stack stays as it is. The worker
looks like a Lambda process to the handler (``AWS_EXECUTION_ENV=AWS_Lambda_python3.11``;
``--not-lambda`` leaves it unset), so what the API does only there (keeping what it holds
after its first request out of the garbage collector's passes: cirrusmq_api.heap) runs
too. After request_cpu.py's warm-up, ``--requests`` produces of ``--batch`` 1 KiB messages,
then as many receives, each acked in a request of its own. The worker times each
invocation's CPU (its JSON of event and result included, as the Lambda runtime's) and the
collector's passes; prints the p50 and mean per request kind, the collector's share and
how many objects the process holds.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import multiprocessing
import os
import statistics
import sys
import threading
import time
import types
from multiprocessing.connection import Connection
from typing import Any

import httpx
from cirrusmq_local.lambda_runtime import FunctionRuntime
from core_queue import SIGNED, Client, measured_stack, request_kind
from request_cpu import one_size

KINDS = ("produce", "receive", "ack")
LAMBDA_EXECUTION_ENV = "AWS_Lambda_python3.11"


def serve(conn: Connection, environment: dict[str, str], source: str) -> None:
    """The worker: imports the handler in ``environment``, then answers ``("invoke", event
    text, kind)``, ``("record",)`` (start timing) and ``("stats",)`` until ``("stop",)``."""
    os.environ.update(environment)
    spec = importlib.util.spec_from_file_location("function_app", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    spec.loader.exec_module(module)
    spent: list[tuple[str, float]] = []
    collector = {"started": 0.0, "total": 0.0, "on": False}

    def collected(phase: str, info: dict[str, int]) -> None:
        if not collector["on"]:
            return
        if phase == "start":
            collector["started"] = time.process_time()
        else:
            collector["total"] += time.process_time() - collector["started"]

    gc.callbacks.append(collected)
    conn.send("ready")
    while True:
        message = conn.recv()
        if message[0] == "invoke":
            _, text, kind = message
            context = types.SimpleNamespace(
                function_name="FrontDoorFunction",
                memory_limit_in_mb="1024",
                invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:front",
                aws_request_id=str(time.time_ns()),
                get_remaining_time_in_millis=lambda: 30_000,
            )
            started = time.process_time()
            answer = json.dumps(module.lambda_handler(json.loads(text), context))
            if collector["on"]:
                spent.append((kind, time.process_time() - started))
            conn.send(answer)
        elif message[0] == "record":
            spent.clear()
            collector.update(total=0.0, on=True)
            conn.send(len(gc.get_objects()))
        elif message[0] == "stats":
            collector["on"] = False
            conn.send((spent, collector["total"], len(gc.get_objects()), gc.get_freeze_count()))
        else:
            return


class Worker:
    """The front door's handler in a process of its own, fed by the local gateway."""

    def __init__(self, lambda_env: bool) -> None:
        self._lambda_env = lambda_env
        self._conn: Connection | None = None
        self._process: Any = None
        self._lock = threading.Lock()

    def install(self) -> FunctionRuntime.invoke:  # type: ignore[valid-type]
        original = FunctionRuntime.invoke
        worker = self

        def invoke(runtime: FunctionRuntime, event: Any) -> Any:
            if runtime.logical_id != "FrontDoorFunction" or "Records" in event:
                return original(runtime, event)
            return worker.call(runtime, event)

        FunctionRuntime.invoke = invoke  # type: ignore[method-assign]
        return original

    def call(self, runtime: FunctionRuntime, event: Any) -> Any:
        with self._lock:
            if self._conn is None:
                self._start(runtime)
            assert self._conn is not None
            self._conn.send(("invoke", json.dumps(event), request_kind(event)))
            return json.loads(self._conn.recv())

    def ask(self, *message: Any) -> Any:
        with self._lock:
            assert self._conn is not None
            self._conn.send(message)
            return self._conn.recv()

    def _start(self, runtime: FunctionRuntime) -> None:
        environment = dict(runtime.environment)
        if self._lambda_env:
            environment["AWS_EXECUTION_ENV"] = LAMBDA_EXECUTION_ENV
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._process = context.Process(
            target=serve, args=(theirs, environment, str(runtime.source)), daemon=True
        )
        self._process.start()
        self._conn = ours
        ours.recv()

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.send(("stop",))
            self._process.join(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--not-lambda", action="store_true", help="leave AWS_EXECUTION_ENV unset")
    args = parser.parse_args(argv)
    worker = Worker(lambda_env=not args.not_lambda)
    original = worker.install()
    try:
        with (
            measured_stack({"FrontDoor": "function-url"}) as stack,
            httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
        ):
            held: list[int] = []  # objects the worker tracks when its timing starts

            def record(on: bool) -> None:
                if on:
                    held.append(worker.ask("record"))

            one_size(Client(api), args.batch, args.requests, record, freeze=False)
            spent, collector_s, held_after, frozen = worker.ask("stats")
    finally:
        worker.stop()
        FunctionRuntime.invoke = original  # type: ignore[method-assign]
    by_kind = {kind: [s for k, s in spent if k == kind] for kind in KINDS}
    total = sum(s for _, s in spent)
    label = "not Lambda" if args.not_lambda else f"AWS_EXECUTION_ENV={LAMBDA_EXECUTION_ENV}"
    print(f"the front door in a process of its own ({label}), batch {args.batch}:")
    for kind, times in by_kind.items():
        median, mean = 1000 * statistics.median(times), 1000 * statistics.mean(times)
        print(f"  {kind:<8} p50 {median:6.1f} ms  mean {mean:6.1f} ms  ({len(times)} requests)")
    means = sum(1000 * statistics.mean(times) for times in by_kind.values())
    print(f"  the three, mean {means:.1f} ms; collector {collector_s / total:.1%} of it")
    print(f"  objects the collector tracks {held[0]} -> {held_after}; frozen {frozen}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
