"""Reads batch objects as messages, caching decoded batches (they are immutable).

The index item is the truth: its ``count`` rows starting at ``base_offset``. An object whose
row count differs is a corruption signal, never silently accepted: it is logged as the
error ``batch_count_mismatch`` (one JSON line: topic, queue, base offset, key, counts) and
the batch is read as the index says: rows beyond ``count`` are ignored (they would shadow
the next batch's offsets), missing rows are missing offsets (later offsets never shift:
each batch's offsets come from its own item).
"""

from __future__ import annotations

import json
import logging
import threading

from cachetools import LRUCache

from ..model import IndexEntry, StoredMessage
from ..storage.batch_objects import BatchObjectGone, BatchObjectStore

log = logging.getLogger("cirrusmq.batches")

COUNT_MISMATCH = "batch_count_mismatch"
"""The stable name of the error logged when an object's rows disagree with its index item."""


class BatchReader:
    def __init__(self, objects: BatchObjectStore, *, cache_bytes: int = 256 * 1024 * 1024) -> None:
        self._objects = objects
        self._cache: LRUCache[tuple[str, int], list[StoredMessage]] = LRUCache(
            maxsize=cache_bytes, getsizeof=lambda batch: sum(len(m.body) + 256 for m in batch)
        )
        self._lock = threading.Lock()

    def messages(self, entry: IndexEntry) -> list[StoredMessage]:
        """The messages of one indexed batch, offsets filled in ([] once it is deleted)."""
        with self._lock:
            cached = self._cache.get((entry.object_key, entry.base_offset))
        if cached is not None:
            return cached
        try:
            data = self._objects.get(entry.object_key)
        except BatchObjectGone:
            return []  # past retention: the lifecycle rule removed it before the index TTL
        from ..codec import decode_batch  # pyarrow: only for handlers that read batches

        batch = as_indexed(
            entry,
            decode_batch(data, topic=entry.topic, queue=entry.queue, base_offset=entry.base_offset),
        )
        with self._lock:
            if sum(len(m.body) + 256 for m in batch) <= self._cache.maxsize:
                self._cache[(entry.object_key, entry.base_offset)] = batch
        return batch


def as_indexed(entry: IndexEntry, rows: list[StoredMessage]) -> list[StoredMessage]:
    """``rows`` of ``entry``'s object cut to what its index item says (at most ``count``
    rows); a row count other than ``count`` is logged as :data:`COUNT_MISMATCH`."""
    if len(rows) == entry.count:
        return rows
    report_mismatch(
        entry.topic, entry.queue, entry.base_offset, entry.object_key, entry.count, len(rows)
    )
    return rows[: entry.count]


def report_mismatch(
    topic: str, queue: int, base_offset: int, object_key: str, indexed: int, stored: int
) -> None:
    """Log one :data:`COUNT_MISMATCH` error (a JSON line with a stable shape)."""
    fields = {
        "event": COUNT_MISMATCH,
        "topic": topic,
        "queue": queue,
        "base_offset": base_offset,
        "object_key": object_key,
        "indexed_count": indexed,
        "object_rows": stored,
    }
    log.error("%s %s", COUNT_MISMATCH, json.dumps(fields, sort_keys=True), extra=fields)
