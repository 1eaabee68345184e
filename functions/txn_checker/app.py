"""TxnCheckerFunction (EventBridge, once a minute; a half send whose first check falls due
before the next firing starts one too): back-checks undecided transactions, working
through its invocation pass by pass (see services/transactions/checks.py).

A run with no transaction undecided returns after one read (the checker costs nothing at
rest). Otherwise it passes over the transactions due now (publishing check requests,
rolling back those out of checks or past retention, finishing interrupted commits) and,
for ``loop_seconds`` of wall time (from the schedule's Input; a wake runs
:data:`WOKEN_LOOP_SECONDS`), passes again as transactions fall due, sleeping on the broker
clock between passes, so the local stack's ``advance_time`` wakes it at once. It returns
after its first pass when nothing falls due within the run, or when another run covers it.
"""

import time
from dataclasses import asdict

from cirrusmq_broker import clock
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.telemetry import scheduled

RESERVE_SECONDS = 10.0
WOKEN_LOOP_SECONDS = 59.0
"""A run started by a half send loops as long as a scheduled one."""


@scheduled("TxnChecker")
def lambda_handler(event: dict, context: object) -> dict:
    event = event or {}
    woken = bool(event.get("wake"))
    if event.get("task", "check") != "check":
        raise ValueError(f"unknown checker task {event.get('task')!r}")
    loop_seconds = float(event.get("loop_seconds", WOKEN_LOOP_SECONDS if woken else 0))
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is not None:
        loop_seconds = min(loop_seconds, remaining() / 1000 - RESERVE_SECONDS)
    deadline = time.monotonic() + loop_seconds
    with clock.sleeper():
        try:
            report = current_broker().transactions.run(
                sleep_until=clock.sleep_until,
                time_left=lambda: deadline - time.monotonic(),
                woken=woken,
            )
        except clock.Interrupted:
            return {"interrupted": True}
    return asdict(report)
