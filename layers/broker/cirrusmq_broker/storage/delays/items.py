"""Delay items (TimersTable): delayed messages waiting for their due time.

The table, the ``timers/`` prefix and the item attributes keep their deployed names (the
stored format); in code the concept is a delay everywhere.

One item per (send request, target queue, due second), never one per message: partition
``slot`` = the due minute (epoch ms // 60000), sort key ``due_key`` = ``<due_ms:013d>#<id>``.
The item names the delay object (``timers/`` in S3) and the rows it covers. A due item is
deleted in the very transaction that appends its messages to the topic, so a moved item
is gone and a scan of a minute needs no lower bound on the sort key.

The table also holds the release's checkpoint (``slot = "checkpoint"``) and cancel
records (``slot = "cancelled#<topic>#<message id>"``, TTL ``expires_at``). The checkpoint
item also carries the run lease: ``run_until`` (a release run loops until then) and
``asked_at`` (a send asked for a run then, and no run has started since).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from ...rules.delays import due_minute
from ..dynamo import KeysToRead, batch_get, error_code, from_item, to_item
from ..run_leases import RunLease, RunLeaseStore

CHECKPOINT_SLOT = "checkpoint"
CANCEL_RECORD_DAYS = 7
"""A cancel is remembered this long after the message's due time (a repeated cancel)."""


@dataclass(frozen=True)
class DelayItem:
    """One delay item: rows [first_row, first_row + count) of a delay object."""

    due_ms: int
    item_id: str
    topic: str
    queue: int
    object_key: str
    first_row: int
    count: int
    created_ms: int = 0
    siblings: tuple[str, ...] = ()
    """On the last item of a delay object: ``key`` of every other item of it."""
    last: bool = True
    """The delay object's item due last: its move deletes the object (others gone)."""
    cancelled: frozenset[str] = field(default_factory=frozenset)
    """Message ids cancelled before the move (skipped by it)."""
    cancels: int = 0
    """Cancel writes so far: the move's delete is conditional on it (a cancel racing the move)."""
    object_missing: bool = False
    """Filed again when its delay object was found missing: due when its retention ended."""

    @property
    def slot(self) -> str:
        return str(due_minute(self.due_ms))

    @property
    def due_key(self) -> str:
        return f"{self.due_ms:013d}#{self.item_id}"

    @property
    def key(self) -> str:
        return f"{self.slot}|{self.due_key}"


def split_key(key: str) -> dict[str, str]:
    slot, due_key = key.split("|", 1)
    return {"slot": slot, "due_key": due_key}


class DelayItemStore:
    """Builds the transaction items of delay items and reads due ones."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    # ---------------------------------------------------------------- writing
    def put_request(self, entry: DelayItem) -> dict[str, Any]:
        """A transaction item that stores ``entry`` (once)."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "slot": entry.slot,
                        "due_key": entry.due_key,
                        "due_ms": entry.due_ms,
                        "topic": entry.topic,
                        "queue": entry.queue,
                        "object_key": entry.object_key,
                        "first_row": entry.first_row,
                        "row_count": entry.count,
                        "created_ms": entry.created_ms,
                        "siblings": list(entry.siblings) or None,
                        "not_last": True if not entry.last else None,
                        "object_missing": True if entry.object_missing else None,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(due_key)",
            }
        }

    def delete_request(self, entry: DelayItem) -> dict[str, Any]:
        """A transaction item that deletes ``entry`` as it was read: it fails when another
        move took it or a cancel changed it since."""
        if entry.cancels:
            condition = "attribute_exists(due_key) AND cancels = :c"
            values: dict[str, Any] = {"ExpressionAttributeValues": to_item({":c": entry.cancels})}
        else:
            condition, values = "attribute_exists(due_key) AND attribute_not_exists(cancels)", {}
        return {
            "Delete": {
                "TableName": self._table,
                "Key": to_item({"slot": entry.slot, "due_key": entry.due_key}),
                "ConditionExpression": condition,
                **values,
            }
        }

    def delete(self, entries: list[DelayItem]) -> None:
        """Delete entries in one transaction (all or none; raises on a changed one)."""
        for start in range(0, len(entries), 100):
            self._client.transact_write_items(
                TransactItems=[self.delete_request(e) for e in entries[start : start + 100]]
            )

    def postpone(self, entry: DelayItem, due_ms: int) -> bool:
        """File ``entry`` again as due at ``due_ms``, marked ``object_missing`` (one
        transaction: the item as read is deleted, its copy put under the new due time);
        False when another run moved it or a cancel changed it since it was read."""
        later = dataclasses.replace(entry, due_ms=due_ms, object_missing=True)
        try:
            self._client.transact_write_items(
                TransactItems=[self.delete_request(entry), self.put_request(later)]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return False
            raise
        return True

    # ---------------------------------------------------------------- reading
    def due(self, minute: int, upto_ms: int) -> list[DelayItem]:
        """Every item of ``minute`` due at or before ``upto_ms`` (no lower bound: moved
        items are deleted, so whatever is left is pending, stragglers included)."""
        return self._query(
            "slot = :s AND due_key <= :k", {":s": str(minute), ":k": f"{upto_ms:013d}#~"}
        )

    def overdue_before(self, before_ms: int) -> list[DelayItem]:
        """Every delay item due before ``before_ms``, by a scan (a first run or a catch-up
        after a long outage; the table holds only pending items)."""
        found: list[DelayItem] = []
        paginator = self._client.get_paginator("scan")
        for page in paginator.paginate(
            TableName=self._table,
            FilterExpression="due_ms < :b AND attribute_exists(object_key)",
            ExpressionAttributeValues=to_item({":b": before_ms}),
            ConsistentRead=True,
        ):
            found.extend(_entry(from_item(item)) for item in page["Items"])
        return found

    def in_second(self, due_ms: int) -> list[DelayItem]:
        """Items due within the second of ``due_ms``."""
        second = due_ms // 1000 * 1000
        return self._query(
            "slot = :s AND due_key BETWEEN :a AND :b",
            {
                ":s": str(due_minute(due_ms)),
                ":a": f"{second:013d}#",
                ":b": f"{second + 999:013d}#~",
            },
        )

    def pending_count(self, topic: str, minutes: range) -> int:
        """Messages of ``topic`` still waiting in the delay items of ``minutes`` (one query
        per minute; cancelled messages left out)."""
        total = 0
        for minute in minutes:
            paginator = self._client.get_paginator("query")
            for page in paginator.paginate(
                TableName=self._table,
                KeyConditionExpression="slot = :s",
                FilterExpression="topic = :t",
                ExpressionAttributeValues=to_item({":s": str(minute), ":t": topic}),
            ):
                for item in page["Items"]:
                    entry = _entry(from_item(item))
                    total += max(0, entry.count - len(entry.cancelled))
        return total

    def remaining(self, keys: list[str]) -> set[str]:
        """Those of ``keys`` still stored (consistent read)."""
        if not keys:
            return set()
        found = batch_get(
            self._client,
            [KeysToRead(self._table, [split_key(k) for k in keys], consistent=True)],
        )[self._table]
        return {f"{item['slot']}|{item['due_key']}" for item in found}

    def _query(self, condition: str, values: dict[str, Any]) -> list[DelayItem]:
        found: list[DelayItem] = []
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=to_item(values),
            ConsistentRead=True,
        ):
            found.extend(_entry(from_item(item)) for item in page["Items"])
        return found

    # ---------------------------------------------------------------- cancelling
    def cancel(self, entry: DelayItem, message_id: str, *, record_expires_at: int) -> bool:
        """Mark ``message_id`` of ``entry`` cancelled and remember the cancel; False when
        the item is gone (moved) meanwhile."""
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": to_item({"slot": entry.slot, "due_key": entry.due_key}),
                            "UpdateExpression": "ADD cancelled :m, cancels :one",
                            "ConditionExpression": "attribute_exists(due_key)",
                            "ExpressionAttributeValues": {
                                ":m": {"SS": [message_id]},
                                ":one": {"N": "1"},
                            },
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": to_item(
                                {
                                    "slot": cancel_slot(entry.topic, message_id),
                                    "due_key": "-",
                                    "due_ms": entry.due_ms,
                                    "expires_at": record_expires_at,
                                }
                            ),
                        }
                    },
                ]
            )
        except ClientError as exc:
            if error_code(exc) == "TransactionCanceledException":
                return False
            raise
        return True

    def was_cancelled(self, topic: str, message_id: str) -> bool:
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"slot": cancel_slot(topic, message_id), "due_key": "-"}),
            ConsistentRead=True,
        ).get("Item")
        return item is not None

    # ---------------------------------------------------------------- checkpoint
    def checkpoint(self) -> int | None:
        """The lowest due minute that may still hold items (None: never set)."""
        item = self._client.get_item(
            TableName=self._table,
            Key=to_item({"slot": CHECKPOINT_SLOT, "due_key": "-"}),
            ConsistentRead=True,
        ).get("Item")
        minute = from_item(item).get("minute") if item else None  # the lease may be alone
        return int(minute) if minute is not None else None

    def advance_checkpoint(self, minute: int) -> None:
        """Move the checkpoint up to ``minute`` (never down: overlapping runs are fine)."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=to_item({"slot": CHECKPOINT_SLOT, "due_key": "-"}),
                UpdateExpression="SET #m = :m",
                ConditionExpression="attribute_not_exists(#m) OR #m < :m",
                ExpressionAttributeNames={"#m": "minute"},
                ExpressionAttributeValues=to_item({":m": minute}),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    # ---------------------------------------------------------------- run lease
    @property
    def runs(self) -> RunLeaseStore:
        """The release's run lease (on the checkpoint item)."""
        return RunLeaseStore(self._client, self._table, {"slot": CHECKPOINT_SLOT, "due_key": "-"})

    def run_lease(self) -> RunLease:
        return self.runs.run_lease()

    def claim_run(self, until: int, unless_covering: int) -> bool:
        return self.runs.claim_run(until, unless_covering)

    def ask_run(self, now: int, *, pending_since: int) -> bool:
        return self.runs.ask_run(now, pending_since=pending_since)

    def run_started(self, now: int) -> None:
        self.runs.run_started(now)

    def withdraw_ask(self, asked_at: int) -> None:
        self.runs.withdraw_ask(asked_at)


def cancel_slot(topic: str, message_id: str) -> str:
    return f"cancelled#{topic}#{message_id}"


def _entry(values: dict[str, Any]) -> DelayItem:
    return DelayItem(
        due_ms=int(values["due_ms"]),
        item_id=values["due_key"].split("#", 1)[1],
        topic=values["topic"],
        queue=int(values["queue"]),
        object_key=values["object_key"],
        first_row=int(values["first_row"]),
        count=int(values["row_count"]),
        created_ms=int(values.get("created_ms", 0)),
        siblings=tuple(values.get("siblings") or ()),
        last=not values.get("not_last", False),
        cancelled=frozenset(values.get("cancelled") or ()),
        cancels=int(values.get("cancels", 0)),
        object_missing=bool(values.get("object_missing", False)),
    )
