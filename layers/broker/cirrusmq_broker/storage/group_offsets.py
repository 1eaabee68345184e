"""Offset reset of a consumer group on one queue (GroupsTable): rewrite the summary, drop
the open leases.

The summary (``<topic>#<queue>``) gets cursor = committed = the target, no open lease and
version + 1, in one transaction with the deletion of the queue's lease items
(``<topic>#<queue>#L...``), conditional on the summary's version: a receive or
change-invisible that saved the summary in between makes the reset fail (the caller reads
again and retries), and a receive after it sees the new cursor and no lease. Deleted lease
items make every receipt handle of them stale (an ack of one finds no lease). The summary is
updated in place (UpdateItem), so attributes other features keep on it survive.

A transaction takes 100 items: a queue with more open leases first has them deleted in
chunks, each chunk in a transaction that checks the summary version. Re-running a reset is
harmless (it sets the same target), so a failure part-way is repaired by running it again.
"""

from __future__ import annotations

import uuid
from typing import Any

from botocore.exceptions import ClientError

from ..errors import StorageContended
from .dynamo import lost_race, to_item
from .groups.codec import INLINE_FIELDS
from .groups.keys import lease_prefix, summary_stream

LEASES_PER_TRANSACTION = 99
"""Lease deletions in one transaction besides the summary (AWS: 100 items)."""


class GroupOffsetWriter:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def lease_keys(self, group: str, topic: str, queue: int, limit: int) -> list[dict[str, Any]]:
        """Keys of up to ``limit`` open lease items of the queue (consistent read)."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="group_name = :g AND begins_with(#s, :p)",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":g": group, ":p": lease_prefix(topic, queue)}),
            ProjectionExpression="group_name, #s",
            ConsistentRead=True,
            Limit=limit,
        )
        return [{k: item[k] for k in ("group_name", "stream")} for item in response["Items"]]

    def drop_leases(
        self, group: str, topic: str, queue: int, version: int, keys: list[dict[str, Any]]
    ) -> bool:
        """Delete ``keys`` (at most LEASES_PER_TRANSACTION) if the summary is still at
        ``version``; False if it changed."""
        expression, values = _version_condition(version)
        check: dict[str, Any] = {
            "TableName": self._table,
            "Key": self._summary_key(group, topic, queue),
            "ConditionExpression": expression,
        }
        if values:
            check["ExpressionAttributeValues"] = to_item(values)
        return self._transact([{"ConditionCheck": check}, *self._deletes(keys)])

    def reset(
        self,
        group: str,
        topic: str,
        queue: int,
        *,
        offset: int,
        cursor_base: int,
        version: int,
        keys: list[dict[str, Any]],
    ) -> bool:
        """Set cursor and committed to ``offset``, drop the lease stored on the summary and
        delete ``keys`` (the queue's remaining lease items, at most LEASES_PER_TRANSACTION)
        if the summary is still at ``version`` (0: absent); False if it changed."""
        expression, condition_values = _version_condition(version)
        values = {
            ":t": topic,
            ":q": queue,
            ":o": offset,
            ":b": cursor_base,
            ":zero": 0,
            ":next": version + 1,
            **condition_values,
        }
        update = {
            "Update": {
                "TableName": self._table,
                "Key": self._summary_key(group, topic, queue),
                "UpdateExpression": "SET #t = :t, #q = :q, committed = :o, #c = :o, "
                "cursor_base = :b, open_leases = :zero, version = :next "
                # held: FIFO offsets waiting for their group; then the lease stored here
                f"REMOVE earliest_deadline, held, {INLINE_FIELDS}",
                "ExpressionAttributeNames": {"#t": "topic", "#q": "queue", "#c": "cursor"},
                "ExpressionAttributeValues": to_item(values),
                "ConditionExpression": expression,
            }
        }
        return self._transact([update, *self._deletes(keys)])

    # ------------------------------------------------------------------ helpers
    def _summary_key(self, group: str, topic: str, queue: int) -> dict[str, Any]:
        return to_item({"group_name": group, "stream": summary_stream(topic, queue)})

    def _deletes(self, keys: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(keys) > LEASES_PER_TRANSACTION:
            raise ValueError(f"at most {LEASES_PER_TRANSACTION} lease deletions per transaction")
        return [{"Delete": {"TableName": self._table, "Key": key}} for key in keys]

    def _transact(self, items: list[dict[str, Any]]) -> bool:
        try:
            self._client.transact_write_items(
                TransactItems=items, ClientRequestToken=uuid.uuid4().hex
            )
        except ClientError as exc:
            if lost_race(exc):
                return False
            raise
        except StorageContended:  # a concurrent write held an item: re-read and retry
            return False
        return True


def _version_condition(version: int) -> tuple[str, dict[str, Any]]:
    """The condition that the summary is still at ``version`` (0: not stored), and its values."""
    if version == 0:
        return "attribute_not_exists(group_name)", {}
    return "version = :version", {":version": version}
