"""Message id lookup (MessageIdsTable): ``<topic>#<message id>`` → queue and offset.

Keyed per topic, so one id used in two topics (or in a topic deleted and created again)
never shadows the other; lookups still check the id found at that offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dynamo import BATCH_WRITE_LIMIT, batch_write, from_item, to_item


@dataclass(frozen=True)
class MessageLocation:
    message_id: str
    topic: str
    queue: int
    offset: int


class MessageIdIndex:
    """Written after the append commits (so it never points at an orphan)."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def put_many(self, locations: list[MessageLocation], *, expires_at: int) -> None:
        requests = [
            {
                "PutRequest": {
                    "Item": to_item(
                        {
                            "message_key": f"{loc.topic}#{loc.message_id}",
                            "message_id": loc.message_id,
                            "topic": loc.topic,
                            "queue": loc.queue,
                            "offset": loc.offset,
                            "expires_at": expires_at,
                        }
                    )
                }
            }
            for loc in locations
        ]
        for start in range(0, len(requests), BATCH_WRITE_LIMIT):
            batch_write(self._client, self._table, requests[start : start + BATCH_WRITE_LIMIT])

    def get(self, topic: str, message_id: str) -> MessageLocation | None:
        item = self._client.get_item(
            TableName=self._table, Key=to_item({"message_key": f"{topic}#{message_id}"})
        ).get("Item")
        if not item:
            return None
        v = from_item(item)
        return MessageLocation(v["message_id"], v["topic"], v["queue"], v["offset"])
