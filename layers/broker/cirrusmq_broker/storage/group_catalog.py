"""What the group metrics read: which consumer groups exist and on which topics (one scan
of the GroupsTable's sparse ``by_topic`` index, keys only: it holds a group's per-queue states
and subscriptions, never its leases; a page per MB of keys, so a single call when there is no
group), and per group its queues' heads with its dead-letter marks in one batched read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..model import stream_id
from .dynamo import KeysToRead, batch_get, from_item
from .group_configs import DLQ_STREAM, DeadLetterMarks, GroupConfigStore
from .queue_heads import QueueHead, QueueHeads


@dataclass(frozen=True)
class HeadsAndMarks:
    heads: dict[tuple[str, int], QueueHead]
    """(topic, queue) → its head (a never-written queue: ``QueueHead()``)."""
    marks: DeadLetterMarks


class GroupCatalog:
    def __init__(self, client: Any, groups_table: str, heads: QueueHeads) -> None:
        self._client = client
        self._table = groups_table
        self._heads = heads

    def groups(self) -> dict[str, set[str]]:
        """Group name → the topics it has state or a subscription on."""
        found: dict[str, set[str]] = {}
        paginator = self._client.get_paginator("scan")
        for page in paginator.paginate(TableName=self._table, IndexName="by_topic"):
            for values in map(from_item, page["Items"]):
                found.setdefault(str(values["group_name"]), set()).add(str(values["topic"]))
        return found

    def heads_and_marks(self, group: str, queues: list[tuple[str, int]]) -> HeadsAndMarks:
        """The heads of ``queues`` and the group's dead-letter marks: one BatchGetItem per
        100 keys (eventually consistent: a metric may lag a second behind)."""
        heads_read = KeysToRead(self._heads.table, [QueueHeads.key(t, q) for t, q in queues])
        marks_read = KeysToRead(self._table, [{"group_name": group, "stream": DLQ_STREAM}])
        found = batch_get(self._client, [heads_read, marks_read])
        by_stream = {str(v["stream"]): v for v in found[self._heads.table]}
        heads = {}
        for topic, queue in queues:
            item = by_stream.get(stream_id(topic, queue))
            heads[(topic, queue)] = (
                QueueHeads.parse(topic, [queue], [item])[queue] if item else QueueHead()
            )
        return HeadsAndMarks(heads, GroupConfigStore.marks_from(found[self._table]))
