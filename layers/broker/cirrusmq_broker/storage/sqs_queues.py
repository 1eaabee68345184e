"""The SQS attributes of a queue: one GroupsTable item of the queue's consumer group.

The item's sort key (``#sqs``) starts with ``#`` like the group's other settings items, so no
group scan takes it for a topic stream, and it carries no ``topic`` attribute (the by_topic
index stays sparse). Values are SQS's attribute strings, as the adapter validated them.

Every change is a read-modify-write fenced on the item's version as read (a random token,
new at every write, so a queue deleted and created again never takes a write meant for the
old one): attributes, tags, the queue's policy, its purge mark and its dead-letter sources
share the item, and a change made meanwhile by another request is never overwritten (the
change is made again on it). An item that vanished between two attempts was deleted with
its queue: the change is not made (no item comes back for a deleted queue).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from ..errors import Busy, TopicNotFound
from .dynamo import from_item, lost_race, to_item

SQS_STREAM = "#sqs"
MAX_ATTEMPTS = 25

Attributes = dict[str, str]
Change = Callable[[Attributes | None], Attributes | None]
"""From the stored attributes (None: the queue has none) to the ones to store (None or
the same: nothing is written)."""


class SqsQueueStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def _key(self, group: str) -> dict[str, Any]:
        return to_item({"group_name": group, "stream": SQS_STREAM})

    def get(self, group: str) -> Attributes | None:
        """The stored attributes, or None when the queue has none (a topic made elsewhere)."""
        return self._read(group)[0]

    def update(self, group: str, change: Change) -> Attributes | None:
        """Apply ``change`` to the stored attributes and store the result if nobody changed
        them since they were read; after a lost race ``change`` runs again on the winner's.
        Returns the attributes stored. Exceptions of ``change`` propagate (nothing stored);
        TopicNotFound when the item was deleted meanwhile."""
        seen = False
        for _ in range(MAX_ATTEMPTS):
            current, version = self._read(group)
            if current is None and seen:
                raise TopicNotFound(f"the queue of group {group!r} was deleted")
            seen = current is not None
            wanted = change(None if current is None else dict(current))
            if wanted is None or wanted == current:
                return current
            try:
                self._client.put_item(
                    TableName=self._table,
                    Item=to_item(
                        {
                            "group_name": group,
                            "stream": SQS_STREAM,
                            "attributes": wanted,
                            "version": uuid.uuid4().hex,
                        }
                    ),
                    **_fence(current, version),
                )
            except ClientError as exc:
                if lost_race(exc):
                    continue
                raise
            return wanted
        raise Busy(f"the attributes of the queue of group {group!r} are contended; retry")

    def put(self, group: str, attributes: Attributes) -> None:
        """Store ``attributes`` whatever is stored (fenced like :meth:`update`)."""
        self.update(group, lambda _: attributes)

    def delete(self, group: str) -> None:
        self._client.delete_item(TableName=self._table, Key=self._key(group))

    def _read(self, group: str) -> tuple[Attributes | None, str | None]:
        item = self._client.get_item(
            TableName=self._table, Key=self._key(group), ConsistentRead=True
        ).get("Item")
        if not item:
            return None, None
        values = from_item(item)
        attributes = {str(k): str(v) for k, v in (values.get("attributes") or {}).items()}
        version = values.get("version")
        return attributes, None if version is None else str(version)


def _fence(current: Attributes | None, version: str | None) -> dict[str, Any]:
    """The put's condition: the item as read (absent; of a release that kept no version;
    or at ``version``)."""
    if current is None:
        return {
            "ConditionExpression": "attribute_not_exists(#s)",
            "ExpressionAttributeNames": {"#s": "stream"},
        }
    if version is None:
        return {
            "ConditionExpression": "attribute_exists(#s) AND attribute_not_exists(#v)",
            "ExpressionAttributeNames": {"#s": "stream", "#v": "version"},
        }
    return {
        "ConditionExpression": "#v = :v",
        "ExpressionAttributeNames": {"#v": "version"},
        "ExpressionAttributeValues": to_item({":v": version}),
    }
