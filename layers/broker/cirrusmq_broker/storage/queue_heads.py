"""Queue heads (QueueHeadsTable): one item per queue that never expires.

A head holds the queue's published end: every offset below it has its index item (or had
one that retention removed), and readers plan up to it. An append puts its index item at
the log's end first (the chain of index items is the log: a put lands only where no item
is), then publishes it by moving the head past it, or moves the head in the same
transaction as the index item. So the head never goes backwards and offsets never repeat,
even after retention has removed every index item of the queue; it may lag items an
append has put and not yet published (a crash between the two), which the next append
to the queue walks over and publishes. Deleting a topic closes its heads in the same
transaction that retires the topic: an append whose publish finds its head closed takes
its item back and is refused instead of being acknowledged and purged later. The heads
outlive their topic: a topic created again under the name reopens them in its create
transaction and goes on from the old offsets, so an offset never names two messages (a
position a consumer kept skips nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from botocore.exceptions import ClientError

from ..model import stream_id
from .dynamo import KeysToRead, batch_get, error_code, from_item, to_item

not_past_base = "(attribute_not_exists(next_offset) OR next_offset <= :base)"
"""The head has not passed the base offset an append takes (it may lag the log's end)."""
below_end = "(attribute_not_exists(next_offset) OR next_offset < :end)"
still_open = "attribute_not_exists(closed)"


class Published(Enum):
    """What publishing an appended batch found."""

    MOVED = "moved"
    """The head moved to the batch's end."""
    PASSED = "passed"
    """Another append had already published past the batch's end."""
    CLOSED = "closed"
    """The topic was deleted before the batch was published: it is not part of the log."""


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

    def advance_request(self, topic: str, queue: int, base: int, new: int) -> dict[str, Any]:
        """A transaction item moving the head to ``new`` for a batch at ``base`` (if the
        head has not passed ``base`` and is still open; the index item's put in the same
        transaction is what takes the offset)."""
        return {
            "Update": {
                "TableName": self.table,
                "Key": to_item(self.key(topic, queue)),
                "UpdateExpression": "SET next_offset = :new",
                "ConditionExpression": f"{not_past_base} AND {still_open}",
                "ExpressionAttributeValues": to_item({":new": new, ":base": base}),
            }
        }

    def publish(self, topic: str, queue: int, end: int) -> Published:
        """Move the head to ``end`` unless it is there or past already (one conditional
        write); a head closed below ``end`` publishes nothing."""
        try:
            self._client.update_item(
                TableName=self.table,
                Key=to_item(self.key(topic, queue)),
                UpdateExpression="SET next_offset = :end",
                ConditionExpression=f"{below_end} AND {still_open}",
                ExpressionAttributeValues=to_item({":end": end}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            head = _head(from_item(exc.response.get("Item") or {}))
            if head.next_offset >= end:  # published before the topic was deleted, if it was
                return Published.PASSED
            if head.closed:
                return Published.CLOSED
            raise  # neither closed nor past: not a condition this update has
        return Published.MOVED

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
