"""TxnCheckerFunction (scheduled): back-checks undecided transactions.

A run with no transaction undecided returns after one read (the checker costs nothing at
rest). Otherwise each run makes a pass over the transactions due now (publishing check
requests, rolling back those out of checks or past retention, finishing interrupted
commits) and, while ``loop_seconds`` (from the schedule's Input) last, sleeps until the
next one falls due and passes again; it returns at once when none falls due within that
time. While a local stack drives the broker clock (``LocalStack.advance_time``; the offset
is always 0 on AWS) each firing makes one pass, so advancing time never waits for a loop
in real time.
"""

import time
from dataclasses import asdict

from cirrusmq_broker import clock
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.trace import request_scope
from cirrusmq_broker.services.transactions.checks import CheckReport
from cirrusmq_broker.telemetry import scheduled

RESERVE_SECONDS = 10.0
MAX_PAUSE_SECONDS = 5.0


@scheduled("TxnChecker")
def lambda_handler(event: dict, context: object) -> dict:
    if event.get("task", "check") != "check":
        raise ValueError(f"unknown checker task {event.get('task')!r}")
    service = current_broker().transactions
    loop_seconds = float(event.get("loop_seconds", 0))
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is not None:
        loop_seconds = min(loop_seconds, remaining() / 1000 - RESERVE_SECONDS)
    end = time.monotonic() + loop_seconds
    totals: dict[str, int] = {}
    if not service.any_undecided():
        return asdict(CheckReport())
    while True:
        with request_scope(lambda: current_broker().trace):  # a pass: one trace write at most
            report = service.run_checks()
        for name, value in asdict(report).items():
            totals[name] = totals.get(name, 0) + value
        left = end - time.monotonic()
        if left <= 0 or clock.offset_ms():
            return totals
        wait = service.next_due_in(left)
        if wait is None:
            return totals
        time.sleep(min(max(wait, 0.2), MAX_PAUSE_SECONDS, left))
