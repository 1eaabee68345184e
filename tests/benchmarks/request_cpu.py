"""CPU time per request by batch size: what a request costs whatever its size, and per message.

    python tests/benchmarks/request_cpu.py [--batches 1,1000] [--requests 30]
        [--front-door function-url] [--freeze-after-warm-up]

For each batch size, on one local stack: ``--requests`` produces of that many 1 KiB
messages (stamped, with client message ids, as the SDK's producer sends), then receives of
that many, each delivery acked in a request of its own. Each invocation's CPU time is
taken as ``core_queue.py`` takes it (this process's, less the local stack's own threads),
without that benchmark's bookkeeping of calls and units. It includes the local runtime's
JSON round trip of event and result, half of which Lambda does not make (the event's
``dumps`` and the result's ``loads``: ~5-6 ms per 1,000 messages across the three, ~0 at
batch 1). Prints the p50 and the mean per request kind, and the share of that CPU time the
garbage collector took in the invoking thread (its passes of every generation). The
smallest batch gives the part of a request that does not grow with its messages;
docs/deploy.md sets it against what batch 1,000's cost goals leave.

``--freeze-after-warm-up`` moves what the process holds after each size's warm-up
requests out of the collector's passes (``gc.freeze``), as a function on Lambda does after
its first request of each kind (cirrusmq_api.heap; the local stack does not): what the
collector's full passes over long-lived objects cost.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from cirrusmq_local.lambda_runtime import FunctionRuntime
from core_queue import (
    FRONT_DOORS,
    SIGNED,
    Client,
    background_cpu,
    measured_stack,
    request_kind,
)

KINDS = ("produce", "receive", "ack")
WARM_UP_REQUESTS = 3


@contextmanager
def cpu_by_kind(into: dict[str, list[float]]) -> Iterator[Callable[[bool], None]]:
    """Records each produce, receive and ack invocation's CPU seconds in ``into`` while
    switched on (the callable yielded switches it), and the collector's in ``into["gc"]``."""
    original = FunctionRuntime.invoke
    recording = [False]
    invoking: dict[int, float] = {}  # thread id -> CPU time its collection started at

    def invoke(runtime: FunctionRuntime, event: Any) -> Any:
        kind = request_kind(event) if isinstance(event, dict) and "Records" not in event else ""
        if not recording[0] or kind not in into:
            return original(runtime, event)
        cpu, background = time.process_time(), background_cpu()
        invoking[threading.get_ident()] = 0.0
        try:
            return original(runtime, event)
        finally:
            invoking.pop(threading.get_ident(), None)
            spent = time.process_time() - cpu - (background_cpu() - background)
            into[kind].append(max(0.0, spent))

    def collected(phase: str, info: dict[str, int]) -> None:
        thread = threading.get_ident()
        if thread not in invoking:
            return
        if phase == "start":
            invoking[thread] = time.thread_time()
        else:
            into["gc"].append(time.thread_time() - invoking[thread])

    FunctionRuntime.invoke = invoke  # type: ignore[method-assign]
    gc.callbacks.append(collected)
    try:
        yield lambda on: recording.__setitem__(0, on)
    finally:
        gc.callbacks.remove(collected)
        FunctionRuntime.invoke = original  # type: ignore[method-assign]


def one_size(
    client: Client, batch: int, requests: int, record: Callable[[bool], None], freeze: bool
) -> None:
    topic, group = f"cpu-{batch}", "cpu"
    client.create_topic(topic, 8)
    for _ in range(WARM_UP_REQUESTS):
        client.send(topic, batch)
        client.ack(group, client.receive(group, topic, batch, wait=1))
    gc.collect()  # both ways start measuring right after a full pass
    if freeze:
        gc.freeze()
    record(True)
    try:
        for _ in range(requests):
            client.send(topic, batch)
        for _ in range(requests):
            handles = client.receive(group, topic, batch, wait=1)
            if not handles:
                raise RuntimeError(f"batch {batch}: a receive came back empty")
            client.ack(group, handles)
    finally:
        record(False)
        gc.unfreeze()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--batches",
        type=lambda text: tuple(int(b) for b in text.split(",")),
        default=(1, 1000),
        help="batch sizes, comma-separated (default 1,1000)",
    )
    parser.add_argument("--requests", type=int, default=30, help="requests of each kind")
    parser.add_argument("--front-door", choices=FRONT_DOORS, default="function-url")
    parser.add_argument(
        "--freeze-after-warm-up",
        action="store_true",
        help="keep what the process holds after the warm-up out of the collector's passes",
    )
    args = parser.parse_args(argv)
    print(
        f"CPU ms per request, {args.requests} of each kind per batch size, 1 KiB messages,"
        f" FrontDoor={args.front_door}, acks in requests of their own:"
    )
    print(
        f"{'batch':>5} | "
        + " | ".join(f"{kind + ' p50 / mean':>20}" for kind in KINDS)
        + f" | {'collector':>9}"
    )
    with (
        measured_stack({"FrontDoor": args.front_door}) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
    ):
        client = Client(api)
        for batch in args.batches:
            spent: dict[str, list[float]] = {kind: [] for kind in (*KINDS, "gc")}
            with cpu_by_kind(spent) as record:
                one_size(client, batch, args.requests, record, args.freeze_after_warm_up)
            cells = [
                f"{1000 * statistics.median(times):>9.1f} / {1000 * statistics.mean(times):>8.1f}"
                for times in (spent[kind] for kind in KINDS)
            ]
            share = sum(spent["gc"]) / sum(sum(spent[kind]) for kind in KINDS)
            print(f"{batch:>5} | " + " | ".join(cells) + f" | {share:>8.1%}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
