"""JanitorFunction (scheduled): purges deleted topics, sweeps orphaned batch objects, and
goes on with move tasks whose runner stopped (``resume_move_tasks``).

Each run works until the invocation's remaining time falls to ``RESERVE_SECONDS`` (what the
last step may still need) and, sweeping, examines at most ``CIRRUSMQ_SWEEP_MAX_OBJECTS``
objects; the next scheduled run goes on from where it stopped.
"""

from collections.abc import Callable
from dataclasses import asdict

from cirrusmq_broker.container import current_broker
from cirrusmq_broker.services.janitor import SWEEP_MAX_OBJECTS
from cirrusmq_broker.settings import environment
from cirrusmq_broker.telemetry import scheduled

RESERVE_SECONDS = 60.0


@scheduled("Janitor")
def lambda_handler(event: dict, context: object) -> dict:
    janitor = current_broker().janitor
    task = event.get("task")
    time_left = _time_left(context)
    if task == "purge_deleted_topics":
        return {"purged": janitor.purge_deleted_topics(time_left=time_left)}
    if task == "sweep_orphans":
        limit = int(environment().get("CIRRUSMQ_SWEEP_MAX_OBJECTS") or SWEEP_MAX_OBJECTS)
        return asdict(janitor.sweep_orphans(max_objects=limit, time_left=time_left))
    if task == "resume_move_tasks":
        tasks = current_broker().move_tasks.resume_running(time_left=time_left)
        return {"resumed": [(t.group, t.stream, t.status) for t in tasks]}
    raise ValueError(f"unknown janitor task {task!r}")


def _time_left(context: object) -> Callable[[], float] | None:
    """Seconds of work left in this invocation; None without a Lambda context (the
    service's own budget applies)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    return lambda: remaining() / 1000 - RESERVE_SECONDS
