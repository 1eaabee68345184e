"""Active topics, cached briefly so the hot paths do not read the topics table per call."""

from __future__ import annotations

import threading

from cachetools import TTLCache

from ..errors import TopicNotFound
from ..model import Topic, TopicStatus
from ..storage.topics import TopicStore
from ..validation import check_topic_name

TOPIC_CACHE_SECONDS = 30
"""A deleted topic is purged only after this (plus the longest handler timeout)."""


class TopicCatalog:
    def __init__(self, store: TopicStore) -> None:
        self._store = store
        self._cache: TTLCache[str, Topic] = TTLCache(maxsize=4096, ttl=TOPIC_CACHE_SECONDS)
        self._lock = threading.Lock()

    def active(self, name: str, *, internal: bool = False) -> Topic:
        """The active topic ``name``; TopicNotFound otherwise. ``internal``: a retry or
        dead-letter topic's name, which the caller has checked (it carries a dot).

        A topic is read eventually consistently; one that read finds missing or not active
        is read again consistently before TopicNotFound is raised: a replica behind the
        topic's write is no proof it is gone, and callers drop delay items or roll
        transactions back on TopicNotFound."""
        if not internal:
            check_topic_name(name)
        with self._lock:
            topic = self._cache.get(name)
        if topic is None:
            topic = self._store.get(name)
            if topic is None or topic.status is not TopicStatus.ACTIVE:
                topic = self._store.get(name, consistent=True)
            if topic is None or topic.status is not TopicStatus.ACTIVE:
                raise TopicNotFound(f"topic {name!r} does not exist")
            with self._lock:
                self._cache[name] = topic
        return topic

    def cached(self, name: str) -> Topic | None:
        """The active topic ``name`` if this process has it cached, else None: no read
        (message trace asks it, so an untraced topic never costs a call)."""
        with self._lock:
            return self._cache.get(name)

    def forget(self, name: str) -> None:
        with self._lock:
            self._cache.pop(name, None)
