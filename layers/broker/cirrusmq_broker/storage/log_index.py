"""The log index (LogIndexTable): one item per batch object, keyed by queue and base offset.

Appends race for the tail with a conditional put at ``next offset``; the tail is cached per
queue so the produce path issues no query unless it lost a race or starts cold.
"""

from __future__ import annotations

import threading
from typing import Any

from ..model import IndexEntry, QueueOffsets, stream_id
from .dynamo import batch_write, from_item, to_item

not_yet_appended = "attribute_not_exists(base_offset)"
still_retained = "expires_at > :now"


class LogIndex:
    """Reads the index and builds the conditional puts that append to it."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table
        self._tails: dict[str, int] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- tail cache
    def next_offset(self, topic: str, queue: int) -> int:
        """The offset the next batch of this queue should get (cached; may be stale)."""
        stream = stream_id(topic, queue)
        with self._lock:
            cached = self._tails.get(stream)
        return cached if cached is not None else self.refresh_tail(topic, queue)

    def refresh_tail(self, topic: str, queue: int) -> int:
        """Re-read the tail with a consistent read (after a lost race or a cold start)."""
        last = self.last_entry(topic, queue, consistent=True)
        tail = last.next_offset if last else 0
        self.remember_tail(topic, queue, tail)
        return tail

    def remember_tail(self, topic: str, queue: int, tail: int) -> None:
        stream = stream_id(topic, queue)
        with self._lock:
            self._tails[stream] = max(tail, self._tails.get(stream, 0))

    # ---------------------------------------------------------------- appending
    def put_request(self, entry: IndexEntry, *, expires_at: int) -> dict[str, Any]:
        """A transaction item that appends ``entry`` unless its offset is taken."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "stream": stream_id(entry.topic, entry.queue),
                        "base_offset": entry.base_offset,
                        "count": entry.count,
                        "object_key": entry.object_key,
                        "size_bytes": entry.size_bytes,
                        "min_timestamp": entry.min_timestamp,
                        "max_timestamp": entry.max_timestamp,
                        "expires_at": expires_at,
                    }
                ),
                "ConditionExpression": not_yet_appended,
            }
        }

    # ---------------------------------------------------------------- reading
    def read_from(
        self, topic: str, queue: int, base_offset: int, limit: int, *, now_s: int
    ) -> list[IndexEntry]:
        """Up to ``limit`` unexpired entries with base offset >= ``base_offset``, in order.

        Entries past their retention are left out even while DynamoDB's TTL has not yet
        deleted them (it may take up to two days).
        """
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset >= :b",
            FilterExpression=still_retained,
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item(
                {":s": stream_id(topic, queue), ":b": base_offset, ":now": now_s}
            ),
            Limit=limit,
            ConsistentRead=True,
        )
        return [_entry(topic, queue, from_item(item)) for item in response["Items"]]

    def entry_at(self, topic: str, queue: int, offset: int) -> IndexEntry | None:
        """The entry whose batch holds ``offset``."""
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s AND base_offset <= :o",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue), ":o": offset}),
            ScanIndexForward=False,
            Limit=1,
        )
        items = response["Items"]
        entry = _entry(topic, queue, from_item(items[0])) if items else None
        return entry if entry and offset < entry.next_offset else None

    def last_entry(self, topic: str, queue: int, *, consistent: bool = False) -> IndexEntry | None:
        return self._edge_entry(topic, queue, last=True, consistent=consistent)

    def offsets(self, topic: str, queue: int) -> QueueOffsets:
        """The retained range [min, max) of one queue."""
        first = self._edge_entry(topic, queue, last=False, consistent=True)
        last = self._edge_entry(topic, queue, last=True, consistent=True)
        if first is None or last is None:
            return QueueOffsets(queue, 0, 0)
        return QueueOffsets(queue, first.base_offset, last.next_offset)

    def keys_of(self, topic: str, queue: int) -> list[tuple[int, str]]:
        """(base offset, object key) of every entry of a queue (maintenance only)."""
        found: list[tuple[int, str]] = []
        paginator = self._client.get_paginator("query")
        for page in paginator.paginate(
            TableName=self._table,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue)}),
            ProjectionExpression="base_offset, object_key",
            ConsistentRead=True,
        ):
            found.extend((v["base_offset"], v["object_key"]) for v in map(from_item, page["Items"]))
        return found

    def forget_tails(self, topic: str) -> None:
        """Drop cached tails of ``topic`` (it was deleted and created again)."""
        with self._lock:
            for stream in [s for s in self._tails if s.rsplit("#", 1)[0] == topic]:
                del self._tails[stream]

    def delete_entries(self, topic: str, queue: int, base_offsets: list[int]) -> None:
        stream = stream_id(topic, queue)
        for start in range(0, len(base_offsets), 25):
            requests = [
                {"DeleteRequest": {"Key": to_item({"stream": stream, "base_offset": b})}}
                for b in base_offsets[start : start + 25]
            ]
            batch_write(self._client, self._table, requests)
        with self._lock:
            self._tails.pop(stream, None)

    def _edge_entry(
        self, topic: str, queue: int, *, last: bool, consistent: bool
    ) -> IndexEntry | None:
        response = self._client.query(
            TableName=self._table,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "stream"},
            ExpressionAttributeValues=to_item({":s": stream_id(topic, queue)}),
            ScanIndexForward=not last,
            Limit=1,
            ConsistentRead=consistent,
        )
        items = response["Items"]
        return _entry(topic, queue, from_item(items[0])) if items else None


def _entry(topic: str, queue: int, values: dict[str, Any]) -> IndexEntry:
    return IndexEntry(
        topic=topic,
        queue=queue,
        base_offset=values["base_offset"],
        count=values["count"],
        object_key=values["object_key"],
        size_bytes=values["size_bytes"],
        min_timestamp=values["min_timestamp"],
        max_timestamp=values["max_timestamp"],
    )
