"""The SQS attributes of a queue: one GroupsTable item of the queue's consumer group.

The item's sort key (``#sqs``) starts with ``#`` like the group's other settings items, so no
group scan takes it for a topic stream, and it carries no ``topic`` attribute (the by_topic
index stays sparse). Values are SQS's attribute strings, as the adapter validated them.
"""

from __future__ import annotations

from typing import Any

from .dynamo import from_item, to_item

SQS_STREAM = "#sqs"


class SqsQueueStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def _key(self, group: str) -> dict[str, Any]:
        return to_item({"group_name": group, "stream": SQS_STREAM})

    def get(self, group: str) -> dict[str, str] | None:
        """The stored attributes, or None when the queue has none (a topic made elsewhere)."""
        item = self._client.get_item(
            TableName=self._table, Key=self._key(group), ConsistentRead=True
        ).get("Item")
        if not item:
            return None
        return {str(k): str(v) for k, v in (from_item(item).get("attributes") or {}).items()}

    def put(self, group: str, attributes: dict[str, str]) -> None:
        self._client.put_item(
            TableName=self._table,
            Item=to_item({"group_name": group, "stream": SQS_STREAM, "attributes": attributes}),
        )

    def delete(self, group: str) -> None:
        self._client.delete_item(TableName=self._table, Key=self._key(group))
