"""Admin: topics (create, update, list, describe, delete)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import limits
from ..errors import InvalidRequest, TopicNotFound
from ..model import MessageType, QueueOffsets, Topic, TopicStatus
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHeads
from ..storage.topics import TopicStore
from ..validation import check_topic_name
from .topic_catalog import TopicCatalog


@dataclass(frozen=True)
class TopicDescription:
    topic: Topic
    queue_offsets: list[QueueOffsets]


class AdminService:
    def __init__(
        self,
        *,
        store: TopicStore,
        catalog: TopicCatalog,
        index: LogIndex,
        heads: QueueHeads,
        clock: Callable[[], int],
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._index = index
        self._heads = heads
        self._clock = clock

    def create_topic(
        self,
        name: str,
        *,
        queues: int = limits.DEFAULT_QUEUES,
        message_type: str = MessageType.NORMAL.value,
        retention_hours: int = limits.DEFAULT_RETENTION_HOURS,
        trace: bool = False,
    ) -> Topic:
        check_topic_name(name)
        if not limits.MIN_QUEUES <= queues <= limits.MAX_QUEUES:
            raise InvalidRequest(f"queues must be {limits.MIN_QUEUES}-{limits.MAX_QUEUES}")
        if not limits.MIN_RETENTION_HOURS <= retention_hours <= limits.MAX_RETENTION_HOURS:
            raise InvalidRequest(
                f"retention_hours must be {limits.MIN_RETENTION_HOURS}-{limits.MAX_RETENTION_HOURS}"
            )
        try:
            kind = MessageType(message_type)
        except ValueError as exc:
            allowed = ", ".join(t.value for t in MessageType)
            raise InvalidRequest(f"message_type must be one of {allowed}") from exc
        topic = Topic(name, queues, kind, retention_hours, self._clock(), trace=bool(trace))
        self._store.create(topic, heads=self._heads)
        return topic

    def update_topic(
        self, name: str, *, trace: bool | None = None, retention_hours: int | None = None
    ) -> Topic:
        """Change what may change of an active topic: message trace on or off, and the
        retention of the messages stored from now on."""
        check_topic_name(name)
        if "." in name:
            raise TopicNotFound(f"topic {name!r} does not exist")  # internal topics
        if retention_hours is not None and not (
            limits.MIN_RETENTION_HOURS <= retention_hours <= limits.MAX_RETENTION_HOURS
        ):
            raise InvalidRequest(
                f"retention_hours must be {limits.MIN_RETENTION_HOURS}-{limits.MAX_RETENTION_HOURS}"
            )
        topic: Topic | None = self._active(name)
        if trace is not None:
            topic = self._store.set_trace(name, bool(trace))
        if retention_hours is not None and topic is not None:
            topic = self._store.set_retention(name, retention_hours)
        if topic is None:
            raise TopicNotFound(f"topic {name!r} does not exist")
        self._catalog.forget(name)
        return topic

    def list_topics(self) -> list[Topic]:
        return [
            t
            for t in self._store.list()
            if t.status is TopicStatus.ACTIVE and "." not in t.name  # internal topics hidden
        ]

    def describe_topic(self, name: str) -> TopicDescription:
        topic = self._active(name)
        heads = self._heads.get_many(topic.name, list(range(topic.queues)))
        now_s = self._clock() // 1000
        offsets = [
            QueueOffsets(
                q,
                self._index.first_offset(topic.name, q, now_s=now_s, end=heads[q].next_offset),
                heads[q].next_offset,
            )
            for q in range(topic.queues)
        ]
        return TopicDescription(topic, offsets)

    def delete_topic(self, name: str) -> None:
        """Retire the topic now; the janitor purges its data later."""
        check_topic_name(name)
        if not self._store.retire(name, now=self._clock(), heads=self._heads):
            raise TopicNotFound(f"topic {name!r} does not exist")
        self._catalog.forget(name)

    def _active(self, name: str) -> Topic:
        check_topic_name(name)
        topic = self._store.get(name, consistent=True)
        if topic is None or topic.status is not TopicStatus.ACTIVE:
            raise TopicNotFound(f"topic {name!r} does not exist")
        return topic
