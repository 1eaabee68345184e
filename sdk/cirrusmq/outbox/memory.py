""":class:`MemoryOutbox`: the outbox contract in memory (the producer's queue when it has no
outbox file, and a fake for tests)."""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence

from .base import Outbox, OutboxBatch, OutboxEntry, OutboxStats, Refusal, RefusedBatch

__all__ = ["MemoryOutbox"]


class MemoryOutbox(Outbox):
    """:class:`Outbox` in memory: nothing survives the process."""

    durable = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[int, OutboxEntry] = {}
        self._claimed: set[int] = set()
        self._refused: dict[int, Refusal] = {}
        self._next_id = 1

    def _pending(self) -> list[OutboxEntry]:
        return [e for i, e in self._batches.items() if i not in self._refused]

    def append(self, batch: OutboxBatch) -> OutboxEntry:
        with self._lock:
            entry = OutboxEntry(self._next_id, batch)
            self._next_id += 1
            self._batches[entry.entry_id] = entry
            return entry

    def claim_heads(self, *, skip_topics: Collection[str] = ()) -> list[OutboxEntry]:
        with self._lock:
            heads: dict[str, OutboxEntry] = {}
            for entry in self._pending():  # insertion order = id order
                heads.setdefault(entry.batch.topic, entry)
            claimed = []
            for topic, head in heads.items():
                if topic in skip_topics or head.entry_id in self._claimed:
                    continue
                head = OutboxEntry(head.entry_id, head.batch, head.attempts + 1)
                self._batches[head.entry_id] = head
                self._claimed.add(head.entry_id)
                claimed.append(head)
            return claimed

    def followers(self, head: OutboxEntry, *, limit: int) -> list[OutboxEntry]:
        with self._lock:
            found: list[OutboxEntry] = []
            for entry in self._pending():
                if len(found) >= limit:
                    break
                if entry.entry_id <= head.entry_id or entry.batch.topic != head.batch.topic:
                    continue
                if entry.attempts or entry.entry_id in self._claimed:
                    break
                found.append(entry)
            return found

    def merge(self, head: OutboxEntry, batch: OutboxBatch, absorbed: Sequence[int]) -> OutboxEntry:
        with self._lock:
            merged = OutboxEntry(head.entry_id, batch, head.attempts)
            self._batches[head.entry_id] = merged  # same key: same place
            for entry_id in absorbed:
                self._batches.pop(entry_id, None)
                self._claimed.discard(entry_id)
            return merged

    def release(self, entry_id: int) -> None:
        with self._lock:
            self._claimed.discard(entry_id)

    def remove(self, entry_id: int) -> None:
        with self._lock:
            self._claimed.discard(entry_id)
            self._batches.pop(entry_id, None)
            self._refused.pop(entry_id, None)

    def refuse(self, entry_id: int, refusal: Refusal) -> None:
        with self._lock:
            if entry_id in self._batches:
                self._claimed.discard(entry_id)
                self._refused[entry_id] = refusal

    def refused(self) -> list[RefusedBatch]:
        with self._lock:
            return self._refused_list(None)

    def _refused_list(self, entry_ids: Collection[int] | None) -> list[RefusedBatch]:
        return [
            RefusedBatch(i, e.batch, self._refused[i])
            for i, e in self._batches.items()
            if i in self._refused and (entry_ids is None or i in entry_ids)
        ]

    def retry_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        with self._lock:
            moved = self._refused_list(entry_ids)
            for refused in moved:
                del self._refused[refused.entry_id]
            return moved

    def purge_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        with self._lock:
            purged = self._refused_list(entry_ids)
            for refused in purged:
                del self._refused[refused.entry_id]
                del self._batches[refused.entry_id]
            return purged

    def entries(self) -> list[OutboxEntry]:
        with self._lock:
            return self._pending()

    def stats(self) -> OutboxStats:
        with self._lock:
            batches = [e.batch for e in self._pending()]
            refused = [self._batches[i].batch for i in self._refused]
            return OutboxStats(
                batches=len(batches),
                messages=sum(len(b.message_ids) for b in batches),
                bytes=sum(len(b.payload) for b in batches),
                refused_batches=len(refused),
                refused_messages=sum(len(b.message_ids) for b in refused),
            )

    def topic_counts(self) -> dict[str, tuple[int, int, int]]:
        counts: dict[str, tuple[int, int, int]] = {}
        with self._lock:
            for entry in self._pending():
                b = entry.batch
                n, m, size = counts.get(b.topic, (0, 0, 0))
                counts[b.topic] = (n + 1, m + len(b.message_ids), size + len(b.payload))
        return counts
