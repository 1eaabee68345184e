"""Move tasks (GroupsTable items of the source group): one item per task, and one lock item
naming the group's running task.

``#task#<started ms, 15 digits>.<id>``: the task (source and destination, status, counts,
``version``, and ``runner_until``: until when its runner holds it). ``#task``: the lock,
``running`` = the stream of the running task. Starting a task puts both in one transaction,
on condition that no task is running (``no_task_running``); finishing one updates it and
clears the lock in one transaction. Every progress write (in a move's append transaction) is
conditional on the task's version and on it still running (``task_as_read``), so a cancel
or another runner in between makes the move store nothing. Finished tasks expire after
``FINISHED_KEEP_SECONDS``. Sort keys start with ``#``: not queue states.

The registry (``REGISTRY_GROUP`` / ``REGISTRY_STREAM``, a name no group can have): the set
``groups`` of the groups with a running task, added to in the start's transaction and taken
from in the finish's, so the scheduled resume reads one item to find every running task
(none: one read of an item that does not exist).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import cancellation_codes, error_code, from_item, to_item

TASK_PREFIX = "#task#"
LOCK_STREAM = "#task"
REGISTRY_GROUP = "#move-tasks"
REGISTRY_STREAM = "#running"
FINISHED_KEEP_SECONDS = 14 * 24 * 3600

RUNNING, COMPLETED, CANCELLING, CANCELLED, FAILED = (
    "RUNNING", "COMPLETED", "CANCELLING", "CANCELLED", "FAILED",
)  # fmt: skip

no_task_running = "attribute_not_exists(running)"
task_not_stored = "attribute_not_exists(group_name)"
task_as_read = "version = :v AND #s IN (:running, :cancelling)"
"""Progress of a task: unchanged since read, and not finished (a cancel asked meanwhile is
seen by the runner's next read; the fence is the version)."""
lock_names_task = "running = :stream"


@dataclass(frozen=True)
class MoveTask:
    group: str
    """The source group (whose messages it moves)."""
    stream: str
    """Its sort key: ``#task#<started>.<id>``."""
    source_topic: str
    started: int
    """When it started (ms)."""
    destination_topic: str | None = None
    """Every message goes there; None: to the topic ``routes`` names by ``route_property``."""
    route_property: str | None = None
    routes: dict[str, str] = field(default_factory=dict)
    """A message's ``route_property`` value → its destination topic (``""``: no property);
    stored as JSON text (a map attribute cannot have an empty name)."""
    max_per_second: int | None = None
    to_move: int = 0
    moved: int = 0
    status: str = RUNNING
    failure: str | None = None
    version: int = 1
    runner_until: int = 0
    """Until when (ms) its runner holds it; past that, another run may take it over."""
    held: tuple[str, ...] = ()
    """The receipt handles of the batch its last step received (its cursor): a run that
    takes the task over moves what of them is still leased first."""


class MoveTaskStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def create(self, task: MoveTask) -> bool:
        """Store a new running task; False if the group already has a running one."""
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": to_item(
                                {
                                    "group_name": task.group,
                                    "stream": LOCK_STREAM,
                                    "running": task.stream,
                                }
                            ),  # fmt: skip
                            "ConditionExpression": no_task_running,
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": to_item(_item(task)),
                            "ConditionExpression": task_not_stored,
                        }
                    },
                    self._registry_request("ADD", task.group),
                ]
            )
        except ClientError as exc:
            if _refused(exc):
                return False
            raise
        return True

    def get(self, group: str, stream: str) -> MoveTask | None:
        if not stream.startswith(TASK_PREFIX):
            return None
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": stream}),
            ConsistentRead=True,
        ).get("Item")
        return _task(from_item(item)) if item else None

    def running_groups(self) -> list[str]:
        """The groups with a running task (the registry: one read)."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"group_name": REGISTRY_GROUP, "stream": REGISTRY_STREAM}),
            ConsistentRead=True,
        ).get("Item")
        return sorted(item["groups"]["SS"]) if item and "groups" in item else []

    def _registry_request(self, action: str, group: str) -> dict[str, Any]:
        """A transaction item adding ``group`` to (ADD) or taking it from (DELETE) the
        registry's set: unconditional, the lock item's condition in the same transaction
        orders starts and finishes of one group."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": to_item({"group_name": REGISTRY_GROUP, "stream": REGISTRY_STREAM}),
                "UpdateExpression": f"{action} #g :g",
                "ExpressionAttributeNames": {"#g": "groups"},
                "ExpressionAttributeValues": {":g": {"SS": [group]}},
            }
        }

    def running(self, group: str) -> MoveTask | None:
        """The group's running (or cancelling) task, if any."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"group_name": group, "stream": LOCK_STREAM}),
            ConsistentRead=True,
        ).get("Item")
        stream = from_item(item).get("running") if item else None
        return self.get(group, str(stream)) if stream else None

    def recent(self, group: str, limit: int) -> list[MoveTask]:
        """The group's most recent tasks, newest first."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="group_name = :g AND begins_with(#k, :p)",
            ExpressionAttributeNames={"#k": "stream"},
            ExpressionAttributeValues=to_item({":g": group, ":p": TASK_PREFIX}),
            ScanIndexForward=False,
            Limit=limit,
            ConsistentRead=True,
        )
        return [_task(from_item(item)) for item in response["Items"]]

    def progress_request(self, task: MoveTask, moved: int, runner_until: int) -> dict[str, Any]:
        """A transaction item: ``moved`` more messages, the runner's hold extended,
        conditional on the task as read (the fence a move's append carries)."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": to_item({"group_name": task.group, "stream": task.stream}),
                "UpdateExpression": "SET moved = moved + :n, version = :next, runner_until = :u",
                "ConditionExpression": task_as_read,
                "ExpressionAttributeNames": {"#s": "status"},
                "ExpressionAttributeValues": to_item(
                    {
                        ":n": moved,
                        ":next": task.version + 1,
                        ":u": runner_until,
                        ":v": task.version,
                        ":running": RUNNING,
                        ":cancelling": CANCELLING,
                    }
                ),  # fmt: skip
            }
        }

    def begin_step(self, task: MoveTask, held: list[str], runner_until: int) -> MoveTask | None:
        """Record the batch a step is about to move, conditional on the task as read;
        None if it changed (a cancel, another run)."""
        recorded = self._update_as_read(
            task,
            "SET held = :h, version = :next, runner_until = :u",
            task_as_read,
            {":h": json.dumps(held), ":u": runner_until},
        )
        if not recorded:
            return None
        return replace(task, held=tuple(held), version=task.version + 1, runner_until=runner_until)

    @staticmethod
    def after_progress(task: MoveTask, moved: int, runner_until: int) -> MoveTask:
        return replace(
            task, moved=task.moved + moved, version=task.version + 1, runner_until=runner_until
        )

    def take_over(self, task: MoveTask, now: int, runner_until: int) -> MoveTask | None:
        """Hold a running task whose runner's hold passed (it died); None if another run
        holds it or it changed since read."""
        held = self._update_as_read(
            task,
            "SET version = :next, runner_until = :u",
            f"{task_as_read} AND runner_until < :now",
            {":u": runner_until, ":now": now},
        )
        return replace(task, version=task.version + 1, runner_until=runner_until) if held else None

    def _update_as_read(
        self, task: MoveTask, update: str, condition: str, values: dict[str, Any]
    ) -> bool:
        """Apply ``update`` (which moves the version on) if ``condition`` on the task as read
        holds; False if it does not."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"group_name": task.group, "stream": task.stream}),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_item(
                    {
                        **values,
                        ":next": task.version + 1,
                        ":v": task.version,
                        ":running": RUNNING,
                        ":cancelling": CANCELLING,
                    }
                ),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def cancel(self, group: str, stream: str) -> MoveTask | None:
        """Ask a running task to stop (CANCELLING); None if it is not running."""
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=to_item({"group_name": group, "stream": stream}),
                UpdateExpression="SET #s = :cancelling, version = version + :one",
                ConditionExpression="#s = :running",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_item(
                    {":cancelling": CANCELLING, ":running": RUNNING, ":one": 1}
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        return _task(from_item(response["Attributes"]))

    def finish(self, task: MoveTask, status: str, now_s: int, failure: str | None = None) -> bool:
        """End the task as read with ``status``, clearing the lock; False if it changed."""
        values = {
            ":st": status, ":next": task.version + 1, ":v": task.version,
            ":running": RUNNING, ":cancelling": CANCELLING,
            ":e": now_s + FINISHED_KEEP_SECONDS, ":stream": task.stream,
        }  # fmt: skip
        update = "SET #s = :st, version = :next, expires_at = :e"
        if failure is not None:
            update += ", failure = :f"
            values[":f"] = failure
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": to_item({"group_name": task.group, "stream": task.stream}),
                            "UpdateExpression": update,
                            "ConditionExpression": task_as_read,
                            "ExpressionAttributeNames": {"#s": "status"},
                            "ExpressionAttributeValues": to_item(
                                {k: v for k, v in values.items() if k != ":stream"}
                            ),
                        }
                    },
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": to_item({"group_name": task.group, "stream": LOCK_STREAM}),
                            "UpdateExpression": "REMOVE running",
                            "ConditionExpression": lock_names_task,
                            "ExpressionAttributeValues": to_item({":stream": task.stream}),
                        }
                    },
                    self._registry_request("DELETE", task.group),
                ]
            )
        except ClientError as exc:
            if _refused(exc):
                return False
            raise
        return True


def _refused(exc: ClientError) -> bool:
    """A transaction cancelled because one of its conditions failed."""
    return error_code(exc) == "TransactionCanceledException" and (
        "ConditionalCheckFailed" in cancellation_codes(exc)
    )


def _item(task: MoveTask) -> dict[str, Any]:
    return {
        "group_name": task.group,
        "stream": task.stream,
        "source_topic": task.source_topic,
        "started": task.started,
        "destination_topic": task.destination_topic,
        "route_property": task.route_property,
        "routes": json.dumps(task.routes, sort_keys=True),
        "max_per_second": task.max_per_second,
        "to_move": task.to_move,
        "moved": task.moved,
        "status": task.status,
        "failure": task.failure,
        "version": task.version,
        "runner_until": task.runner_until,
    }


def _task(values: dict[str, Any]) -> MoveTask:
    return MoveTask(
        group=values["group_name"],
        stream=values["stream"],
        source_topic=values["source_topic"],
        started=int(values["started"]),
        destination_topic=values.get("destination_topic"),
        route_property=values.get("route_property"),
        routes={str(k): str(v) for k, v in json.loads(values.get("routes") or "{}").items()},
        max_per_second=values.get("max_per_second"),
        to_move=int(values.get("to_move", 0)),
        moved=int(values.get("moved", 0)),
        status=values.get("status", RUNNING),
        failure=values.get("failure"),
        version=int(values.get("version", 1)),
        runner_until=int(values.get("runner_until", 0)),
        held=tuple(json.loads(values.get("held") or "[]")),
    )
