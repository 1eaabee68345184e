"""Long polls benchmark: what N concurrent idle long polls do to send latency, local stack.

    python tests/benchmarks/long_polls.py [--polls 50] [--seconds 45]

What it does, all through the HTTP API of one ``LocalStack`` (moto server), loopback only:

1. Creates an idle 8-queue topic ``idle`` (never written to) and an 8-queue topic ``busy``.
2. Baseline: 100 sequential sends of one message to ``busy`` with nothing else going on;
   p50 / p95 of their wall time (client side).
3. Load: ``--polls`` threads, one ``httpx.Client`` each (timeout 40 s), each loops
   ``POST /v1/groups/g<i>/receive {"topic": "idle", "wait_seconds": 20}`` for ``--seconds``
   (no new poll is started after that; the ones in flight finish). Every poll's duration is
   recorded.
4. While they run, the same 100 sequential sends again, p50 / p95, and the slowdown.
5. Prints the long polls' count, p50 and max duration and how many ran past 20.5 s (a long
   poll must answer within its 20 s wait), and the DynamoDB reads (BatchGetItem + Query) the
   receive handlers made per poll per second: every AWS call of the in-process handlers is
   seen through ``cirrusmq_broker.storage.clients.observe_calls``; a call is a receive's when
   it is made in a thread running a ``POST /v1/groups/{group}/receive`` invocation
   (``FunctionRuntime.invoke`` is wrapped in this process to mark the thread); the count is
   divided by the sum of the polls' durations.

Figures come from one run on this machine against moto: compare them as ratios.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import secrets
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from cirrusmq.credentials import Credentials
from cirrusmq.signing import CirrusAuth
from cirrusmq.testing import LocalStack
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_local.lambda_runtime import FunctionRuntime

QUEUES = 8
SENDS = 100
WARMUP_SENDS = 5
WAIT_SECONDS = 20
LATE_SECONDS = 20.5
HTTP_TIMEOUT = 40.0
SEND_BODY = {"messages": [{"body": "eA=="}]}  # b"x"
RECEIVE_ROUTE = "POST /v1/groups/{group}/receive"
READ_OPERATIONS = ("BatchGetItem", "Query")
MAX_POLLS_PER_THREAD = 10_000
"""A bound on each poll loop's count, besides its time (a poll failing at once loops fast)."""
ERROR_PAUSE_SECONDS = 0.5


# ============================================================== AWS calls by receives
class ReceiveCalls:
    """Counts the AWS calls made in threads running a receive invocation."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._local = threading.local()
        self.counting = False

    def observe(self, service: str, operation: str, params: dict[str, Any]) -> None:
        if self.counting and getattr(self._local, "receive", False):
            with self._lock:
                self.calls[f"{service} {operation}"] += 1

    def install(self) -> Callable[[], None]:
        """Register the observer and wrap the local Lambda runtime; returns the undo."""
        marker = self._local
        original_invoke = FunctionRuntime.invoke

        def invoke(runtime: FunctionRuntime, event: Any) -> Any:
            marker.receive = event.get("routeKey") == RECEIVE_ROUTE
            try:
                return original_invoke(runtime, event)
            finally:
                marker.receive = False

        remove = observe_calls(self.observe)
        FunctionRuntime.invoke = invoke  # type: ignore[method-assign]

        def undo() -> None:
            remove()
            FunctionRuntime.invoke = original_invoke  # type: ignore[method-assign]

        return undo

    def reads(self) -> int:
        with self._lock:
            return sum(self.calls[f"dynamodb {op}"] for op in READ_OPERATIONS)


# ============================================================== sends
CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
"""The local stack's bootstrap admin key (given to it at start)."""
SIGNED = CirrusAuth(CREDENTIALS)
"""Signs every request (the API refuses unsigned ones)."""


def send_once(api: httpx.Client) -> float:
    started = time.perf_counter()
    r = api.post("/v1/topics/busy/messages", json=SEND_BODY)
    elapsed = time.perf_counter() - started
    r.raise_for_status()
    return elapsed


def timed_sends(api: httpx.Client, count: int) -> tuple[list[float], list[float]]:
    """(latencies in s, end times on the perf_counter clock) of ``count`` sequential sends."""
    latencies, ends = [], []
    for _ in range(count):
        latencies.append(send_once(api))
        ends.append(time.perf_counter())
    return latencies, ends


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))  # ceil
    return ordered[int(rank) - 1]


# ============================================================== long polls
@dataclass
class PollLog:
    durations: list[float] = field(default_factory=list)
    delivered: int = 0
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    started: threading.Barrier | None = None


def poll_loop(endpoint: str, group: str, stop_at: float, log: PollLog) -> None:
    body = {"topic": "idle", "wait_seconds": WAIT_SECONDS}
    first = True
    with httpx.Client(base_url=endpoint, timeout=HTTP_TIMEOUT, auth=SIGNED) as api:
        for _ in range(MAX_POLLS_PER_THREAD):
            if time.perf_counter() >= stop_at:
                return
            if first and log.started is not None:
                with contextlib.suppress(threading.BrokenBarrierError):
                    log.started.wait(timeout=30)
                first = False
            started = time.perf_counter()
            try:
                r = api.post(f"/v1/groups/{group}/receive", json=body)
                elapsed = time.perf_counter() - started
                error = None if r.status_code == 200 else f"HTTP {r.status_code}"
                delivered = len(r.json().get("messages", ())) if error is None else 0
            except httpx.HTTPError as exc:
                elapsed = time.perf_counter() - started
                error, delivered = type(exc).__name__, 0
            with log.lock:
                log.durations.append(elapsed)
                log.delivered += delivered
                if error is not None:
                    log.errors[error] += 1
            if error is not None:
                time.sleep(ERROR_PAUSE_SECONDS)


# ============================================================== main
def ms(seconds: float) -> str:
    return f"{1000 * seconds:.1f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=50, help="concurrent long polls")
    parser.add_argument("--seconds", type=float, default=45, help="how long the polls loop")
    args = parser.parse_args(argv)
    if args.polls < 1 or args.seconds <= 0:
        parser.error("--polls must be >= 1 and --seconds > 0")
    run_started = time.perf_counter()
    counter = ReceiveCalls()
    with (
        LocalStack(schedules=False, credentials=CREDENTIALS) as stack,
        httpx.Client(base_url=stack.endpoint, timeout=HTTP_TIMEOUT, auth=SIGNED) as api,
    ):
        for topic in ("idle", "busy"):
            api.post("/v1/topics", json={"name": topic, "queues": QUEUES}).raise_for_status()
        print(f"local stack at {stack.endpoint}; warming up", file=sys.stderr)
        timed_sends(api, WARMUP_SENDS)  # handler imports, cached heads: not measured

        print(f"baseline: {SENDS} sequential sends", file=sys.stderr)
        baseline, _ = timed_sends(api, SENDS)

        undo = counter.install()
        try:
            log = PollLog(started=threading.Barrier(args.polls + 1))
            load_started = time.perf_counter()
            stop_at = load_started + args.seconds
            threads = [
                threading.Thread(
                    target=poll_loop,
                    args=(stack.endpoint, f"g{i}", stop_at, log),
                    name=f"long-poll-{i}",
                    daemon=True,
                )
                for i in range(args.polls)
            ]
            counter.counting = True
            for thread in threads:
                thread.start()
            with contextlib.suppress(threading.BrokenBarrierError):
                log.started.wait(timeout=30)  # every thread is about to send its first poll
            time.sleep(1.0)  # let the first polls reach the handlers
            print(
                f"load: {args.polls} long polls for {args.seconds:g} s;"
                f" {SENDS} sequential sends meanwhile",
                file=sys.stderr,
            )
            sends_started = time.perf_counter()
            loaded, ends = timed_sends(api, SENDS)
            sends_s = time.perf_counter() - sends_started
            join_by = stop_at + HTTP_TIMEOUT + 5
            for thread in threads:
                thread.join(timeout=max(0.0, join_by - time.perf_counter()))
            load_s = time.perf_counter() - load_started
            counter.counting = False
            still_running = sum(thread.is_alive() for thread in threads)
        finally:
            undo()
        with log.lock:
            durations = list(log.durations)
            delivered, errors = log.delivered, dict(log.errors)
        reads = counter.reads()
        calls = dict(counter.calls)

    # After the loops' stop no new poll starts: the load thins out as the last ones finish.
    during = sum(end <= stop_at for end in ends)
    b50, b95 = percentile(baseline, 50), percentile(baseline, 95)
    l50, l95 = percentile(loaded, 50), percentile(loaded, 95)
    poll_seconds = sum(durations)
    late = sum(d > LATE_SECONDS for d in durations)

    print(f"\nCirrusMQ long polls benchmark — local stack (moto server), {args.polls} long polls")
    print(f"\nSend latency, {SENDS} sequential 1-message sends to an 8-queue topic:")
    under = f"under {args.polls} long polls:"
    print(f"  {'baseline (nothing else):':<26}p50 {ms(b50):>10}   p95 {ms(b95):>10}")
    print(f"  {under:<26}p50 {ms(l50):>10}   p95 {ms(l95):>10}")
    print(f"  {'slowdown:':<26}p50 {l50 / b50:>9.2f}x   p95 {l95 / b95:>9.2f}x")
    print(
        f"  the {SENDS} sends under load took {sends_s:.1f} s;"
        f" {during} of them ended before the polls stopped looping ({args.seconds:g} s)"
    )
    print(
        f"\nLong polls (wait_seconds={WAIT_SECONDS}, idle 8-queue topic, one group per thread,"
        f" looped for {args.seconds:g} s, load phase {load_s:.1f} s):"
    )
    if durations:
        print(
            f"  {len(durations)} polls: p50 {statistics.median(durations):.2f} s,"
            f" max {max(durations):.2f} s; over {LATE_SECONDS} s: {late};"
            f" messages delivered: {delivered}; errors: {errors or 'none'}"
        )
    else:
        print("  no poll finished")
    if still_running:
        print(f"  {still_running} poll threads had not finished when the run stopped waiting")
    if poll_seconds > 0:
        print(
            f"  receive handlers' DynamoDB reads (BatchGetItem + Query): {reads} in"
            f" {poll_seconds:.0f} poll-seconds = {reads / poll_seconds:.3f} per poll per second"
        )
    detail = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()))
    print(f"  all AWS calls by receive handlers: {detail or 'none'}")
    print(f"\nRun time {time.perf_counter() - run_started:.0f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
