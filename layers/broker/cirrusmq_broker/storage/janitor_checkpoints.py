"""Orphan-sweep checkpoints: one item per queue, kept in QueueHeadsTable.

The items are keyed ``<topic>#<queue>#sweep``: heads are only ever read by their exact key
``<topic>#<queue>`` (never scanned), so these items stay out of every head read, and the
janitor already has CRUD on that table. No new table is needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import stream_id
from .dynamo import KeysToRead, batch_get, to_item
from .queue_heads import QueueHeads

KEY_SUFFIX = "#sweep"


@dataclass(frozen=True)
class SweepCheckpoint:
    """How far the orphan sweeper got in one queue (times are object write times, ms)."""

    incarnation: int
    """The topic's created_timestamp: a topic created again starts from scratch."""
    swept_until: int = 0
    """Every object written at or before this was examined (0: nothing yet)."""
    pass_cutoff: int | None = None
    """An unfinished pass examines the objects written up to this ..."""
    start_after: str | None = None
    """... and has examined every key up to this one (key order)."""
    visited_at: int = 0
    """When a run last wrote this checkpoint: queues visited longest ago go first."""


class SweepCheckpoints:
    """Reads and writes sweep checkpoints."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    @classmethod
    def beside(cls, heads: QueueHeads) -> SweepCheckpoints:
        """Checkpoints in the heads' table, through the heads' client."""
        return cls(heads._client, heads.table)  # noqa: SLF001 - same table, same client

    @staticmethod
    def key(topic: str, queue: int) -> dict[str, Any]:
        return {"stream": stream_id(topic, queue) + KEY_SUFFIX}

    def get_many(self, queues: list[tuple[str, int]]) -> dict[tuple[str, int], SweepCheckpoint]:
        """Consistent, batched read of the checkpoints of ``(topic, queue)`` pairs found."""
        if not queues:
            return {}
        read = KeysToRead(self._table, [self.key(t, q) for t, q in queues], consistent=True)
        found = {}
        for values in batch_get(self._client, [read])[self._table]:
            topic, queue = values["stream"].removesuffix(KEY_SUFFIX).rsplit("#", 1)
            found[(topic, int(queue))] = SweepCheckpoint(
                incarnation=int(values["incarnation"]),
                swept_until=int(values.get("swept_until", 0)),
                pass_cutoff=_int_or_none(values.get("pass_cutoff")),
                start_after=values.get("start_after"),
                visited_at=int(values.get("visited_at", 0)),
            )
        return found

    def put(self, topic: str, queue: int, checkpoint: SweepCheckpoint) -> None:
        values = {
            **self.key(topic, queue),
            "incarnation": checkpoint.incarnation,
            "swept_until": checkpoint.swept_until,
            "pass_cutoff": checkpoint.pass_cutoff,
            "start_after": checkpoint.start_after,
            "visited_at": checkpoint.visited_at,
        }
        self._client.put_item(TableName=self._table, Item=to_item(values))

    def delete(self, topic: str, queues: int) -> None:
        """Remove the checkpoints of a purged topic."""
        for queue in range(queues):
            self._client.delete_item(TableName=self._table, Key=to_item(self.key(topic, queue)))


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)
