"""Queue heads (QueueHeadsTable): one item per queue that never expires.

A head holds the queue's next offset and is advanced in the same transaction as the index
item of every append, so offsets never repeat or go backwards even after retention has
removed every index item of the queue. Deleting a topic closes its heads in the same
transaction that retires the topic: an append racing the delete is refused instead of
being acknowledged and purged later. The heads outlive their topic: a topic created again
under the name reopens them in its create transaction and goes on from the old offsets, so
an offset never names two messages (a position a consumer kept skips nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import stream_id
from .dynamo import KeysToRead, batch_get, from_item, to_item

never_appended = "attribute_not_exists(next_offset)"
still_at_expected = "next_offset = :expected"
still_open = "attribute_not_exists(closed)"


@dataclass(frozen=True)
class QueueHead:
    """Where a queue's log ends."""

    next_offset: int = 0
    """The offset the next batch gets."""
    closed: bool = False
    """The topic was deleted: nothing more is appended."""


class QueueHeads:
    """Reads heads and builds the transaction items that advance or close them."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table

    @staticmethod
    def key(topic: str, queue: int) -> dict[str, Any]:
        return {"stream": stream_id(topic, queue)}

    def get(self, topic: str, queue: int) -> QueueHead:
        """Consistent read of one head (a queue never appended to reads as offset 0)."""
        item = self._client.get_item(
            TableName=self.table, Key=to_item(self.key(topic, queue)), ConsistentRead=True
        ).get("Item")
        return _head(from_item(item)) if item else QueueHead()

    def get_many(
        self, topic: str, queues: list[int], *, consistent: bool = False
    ) -> dict[int, QueueHead]:
        """Read of several heads in one batched call (eventually consistent unless
        ``consistent``: a stale head is too low, so readers that plan up to it or check an
        offset against it ask for a consistent read)."""
        return self.get_of_topics({topic: queues}, consistent=consistent)[topic]

    def get_of_topics(
        self, queues: dict[str, list[int]], *, consistent: bool = False
    ) -> dict[str, dict[int, QueueHead]]:
        """:meth:`get_many` of several topics' queues (topic → queues) in one batched call
        (a call per 100 heads)."""
        reads = [self.to_read(topic, wanted, consistent) for topic, wanted in queues.items()]
        found = batch_get(self._client, reads)[self.table] if reads else []
        return {topic: self.parse(topic, wanted, found) for topic, wanted in queues.items()}

    def to_read(self, topic: str, queues: list[int], consistent: bool = False) -> KeysToRead:
        """The keys of ``queues``' heads, for a batched read with other tables."""
        return KeysToRead(self.table, [self.key(topic, q) for q in queues], consistent)

    @staticmethod
    def parse(topic: str, queues: list[int], items: list[dict[str, Any]]) -> dict[int, QueueHead]:
        heads = {q: QueueHead() for q in queues}
        for values in items:
            name, queue = values["stream"].rsplit("#", 1)
            if name == topic and int(queue) in heads:
                heads[int(queue)] = _head(values)
        return heads

    def advance_request(self, topic: str, queue: int, expected: int, new: int) -> dict[str, Any]:
        """A transaction item moving the head from ``expected`` to ``new`` (if still open)."""
        at_expected = never_appended if expected == 0 else still_at_expected
        values: dict[str, Any] = {":new": new}
        if expected:
            values[":expected"] = expected
        return {
            "Update": {
                "TableName": self.table,
                "Key": to_item(self.key(topic, queue)),
                "UpdateExpression": "SET next_offset = :new",
                "ConditionExpression": f"{at_expected} AND {still_open}",
                "ExpressionAttributeValues": to_item(values),
            }
        }

    def close_request(self, topic: str, queue: int) -> dict[str, Any]:
        """A transaction item closing the head: later appends are refused."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": to_item(self.key(topic, queue)),
                "UpdateExpression": "SET closed = :closed",
                "ExpressionAttributeValues": to_item({":closed": True}),
            }
        }

    def reopen_request(self, topic: str, queue: int) -> dict[str, Any]:
        """A transaction item reopening the head for a topic created again (it keeps its
        next offset; a queue that never had one gets a bare item, read as offset 0)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": to_item(self.key(topic, queue)),
                "UpdateExpression": "REMOVE closed",
            }
        }


def _head(values: dict[str, Any]) -> QueueHead:
    return QueueHead(int(values.get("next_offset", 0)), bool(values.get("closed", False)))
