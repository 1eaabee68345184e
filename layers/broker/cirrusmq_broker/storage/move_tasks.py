"""Move tasks (GroupsTable items): one item per task in its source group's partition, and
one lock item per source group in the registry partition, naming the group's running task.

``<group> / #task#<started ms, 15 digits>.<id>``: the task (source and destination, status,
counts, ``version``, and ``runner_until``: until when its runner holds it). ``REGISTRY_GROUP
/ <group>`` (a partition no group can have): the lock, ``running`` = the stream of the
running task. Starting a task puts both in one transaction, on condition that no task is
running (``no_task_running``); finishing one updates it and deletes the lock in one
transaction. Every progress write (in a move's append transaction) is conditional on the
task's version and on it still running (``task_as_read``), so a cancel or another runner in
between makes the move store nothing. Finished tasks expire after ``FINISHED_KEEP_SECONDS``.
Sort keys of task items start with ``#``: not queue states.

The registry partition holds exactly the locks of running tasks, so the scheduled resume
finds every running task with one query (none: one query of an empty partition), and tasks
of different source groups share no item: their transactions never conflict.

Tasks an earlier release started keep their lock in their group's partition
(``<group> / LOCK_STREAM``) and their group in the set ``groups`` of the registry item
``REGISTRY_GROUP / LEGACY_REGISTRY_STREAM``: a start checks that lock too (the same
``no_task_running``), and such a task (``locked_in_registry`` False) finishes there.
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
LEGACY_REGISTRY_STREAM = "#running"
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
    locked_in_registry: bool = True
    """Its lock is its group's item of the registry partition (False: a task an earlier
    release started, locked in its group's partition)."""


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
                                    "group_name": REGISTRY_GROUP,
                                    "stream": task.group,
                                    "running": task.stream,
                                }
                            ),  # fmt: skip
                            "ConditionExpression": no_task_running,
                        }
                    },
                    {
                        "ConditionCheck": {
                            "TableName": self._table,
                            "Key": _legacy_lock_key(task.group),
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
        """The groups with a running task: the registry partition's locks (one query), and
        the groups of the earlier release's registry item in it."""
        groups: set[str] = set()
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "group_name = :r",
            "ExpressionAttributeValues": to_item({":r": REGISTRY_GROUP}),
            "ConsistentRead": True,
        }
        while True:
            response = self._client.query(**query)
            for item in response["Items"]:
                if "running" in item:
                    groups.add(item["stream"]["S"])
                groups.update(item.get("groups", {}).get("SS", []))
            if "LastEvaluatedKey" not in response:
                return sorted(groups)
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def running(self, group: str) -> MoveTask | None:
        """The group's running (or cancelling) task, if any."""
        for key in (_lock_key(group), _legacy_lock_key(group)):
            item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get(
                "Item"
            )
            stream = from_item(item).get("running") if item else None
            if stream:
                return self.get(group, str(stream))
        return None

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
                    *self._unlock_requests(task),
                ]
            )
        except ClientError as exc:
            if _refused(exc):
                return False
            raise
        return True

    def _unlock_requests(self, task: MoveTask) -> list[dict[str, Any]]:
        """Transaction items releasing the lock that names ``task``: its registry item
        deleted, or an earlier release's lock cleared and its group taken from that
        release's registry set."""
        names_task = {
            "ConditionExpression": lock_names_task,
            "ExpressionAttributeValues": to_item({":stream": task.stream}),
        }
        if task.locked_in_registry:
            delete = {"TableName": self._table, "Key": _lock_key(task.group), **names_task}
            return [{"Delete": delete}]
        clear = {
            "TableName": self._table,
            "Key": _legacy_lock_key(task.group),
            "UpdateExpression": "REMOVE running",
            **names_task,
        }
        registry = {
            "TableName": self._table,
            "Key": to_item({"group_name": REGISTRY_GROUP, "stream": LEGACY_REGISTRY_STREAM}),
            "UpdateExpression": "DELETE #g :g",
            "ExpressionAttributeNames": {"#g": "groups"},
            "ExpressionAttributeValues": {":g": {"SS": [task.group]}},
        }
        return [{"Update": clear}, {"Update": registry}]


def _lock_key(group: str) -> dict[str, Any]:
    return to_item({"group_name": REGISTRY_GROUP, "stream": group})


def _legacy_lock_key(group: str) -> dict[str, Any]:
    return to_item({"group_name": group, "stream": LOCK_STREAM})


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
        "locked_in_registry": task.locked_in_registry,
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
        locked_in_registry=bool(values.get("locked_in_registry", False)),
    )
