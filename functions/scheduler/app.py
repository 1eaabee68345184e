"""SchedulerFunction (EventBridge, once a minute): moves due delayed messages into their
topics, working through its invocation tick by tick (see services/delays/release.py).

It runs for ``CIRRUSMQ_SCHEDULER_RUN_SECONDS`` of wall time (default 59: the next
invocation takes over), sleeping on the broker clock between ticks, so the local stack's
``advance_time`` wakes it at once.
"""

import time
from dataclasses import asdict

from cirrusmq_broker import clock
from cirrusmq_broker.container import current_broker
from cirrusmq_broker.settings import environment
from cirrusmq_broker.telemetry import scheduled

RESERVE_SECONDS = 5.0


@scheduled("Scheduler")
def lambda_handler(event: dict, context: object) -> dict:
    scheduler = current_broker().delay_release
    run_seconds = float(environment().get("CIRRUSMQ_SCHEDULER_RUN_SECONDS") or 59)
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    deadline = time.monotonic() + run_seconds
    if remaining is not None:
        deadline = min(deadline, time.monotonic() + remaining() / 1000 - RESERVE_SECONDS)
    with clock.sleeper():
        try:
            result = scheduler.run(
                sleep_until=clock.sleep_until,
                time_left=lambda: deadline - time.monotonic(),
                woken=bool((event or {}).get("wake")),
            )
        except clock.Interrupted:
            return {"interrupted": True}
    out = asdict(result)
    out.pop("lateness_ms", None)
    return out
