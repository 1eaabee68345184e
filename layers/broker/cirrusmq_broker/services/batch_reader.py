"""Reads batch objects as messages, caching decoded batches (they are immutable)."""

from __future__ import annotations

import threading

from cachetools import LRUCache

from ..model import IndexEntry, StoredMessage
from ..storage.batch_objects import BatchObjectGone, BatchObjectStore


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

        batch = decode_batch(
            data,
            topic=entry.topic,
            queue=entry.queue,
            base_offset=entry.base_offset,
        )
        with self._lock:
            if sum(len(m.body) + 256 for m in batch) <= self._cache.maxsize:
                self._cache[(entry.object_key, entry.base_offset)] = batch
        return batch
