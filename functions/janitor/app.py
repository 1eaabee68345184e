"""JanitorFunction (scheduled): purges deleted topics, sweeps orphaned batch objects."""

from dataclasses import asdict

from cirrusmq_broker.container import current_broker


def lambda_handler(event: dict, context: object) -> dict:
    janitor = current_broker().janitor
    task = event.get("task")
    if task == "purge_deleted_topics":
        return {"purged": janitor.purge_deleted_topics()}
    if task == "sweep_orphans":
        return asdict(janitor.sweep_orphans())
    raise ValueError(f"unknown janitor task {task!r}")
