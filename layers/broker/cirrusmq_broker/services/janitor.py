"""Janitor: purges deleted topics and sweeps orphaned batch objects.

An orphan is a batch object whose index put never happened (a produce crashed or lost its
request in between). Consumers never see it: they only read through the index. It is
deleted once older than the grace period, which exceeds the longest handler timeout so a
produce still in flight is never swept.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..model import TopicStatus
from ..storage.batch_objects import TOPICS_PREFIX, BatchObjectStore, topic_prefix
from ..storage.group_states import GroupStateStore
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHeads
from ..storage.topics import TopicStore
from .topic_catalog import TOPIC_CACHE_SECONDS

log = logging.getLogger(__name__)

KEY_PATTERN = re.compile(r"^topics/topic=(?P<topic>[^/]+)/queue=(?P<queue>\d+)/")
DELETE_CHUNK = 1000
PURGE_DELAY_SECONDS = TOPIC_CACHE_SECONDS + 60
"""Wait this long after a delete, so no handler still appends to the topic."""


@dataclass(frozen=True)
class SweepReport:
    examined: int
    deleted: int


class JanitorService:
    def __init__(
        self,
        *,
        topics: TopicStore,
        index: LogIndex,
        heads: QueueHeads,
        objects: BatchObjectStore,
        states: GroupStateStore,
        orphan_grace_seconds: int,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._index = index
        self._heads = heads
        self._objects = objects
        self._states = states
        self._grace = orphan_grace_seconds
        self._clock = clock

    def purge_deleted_topics(self) -> list[str]:
        """Remove the data of topics deleted long enough ago; returns their names."""
        purged = []
        now = self._clock()
        for topic in self._topics.list():
            if topic.status is not TopicStatus.DELETING:
                continue
            if now - (topic.deleted_timestamp or 0) < PURGE_DELAY_SECONDS * 1000:
                continue
            for queue in range(topic.queues):
                self._index.delete_entries(
                    topic.name, queue, [base for base, _ in self._index.keys_of(topic.name, queue)]
                )
            self._objects.delete([o.key for o in self._objects.list(topic_prefix(topic.name))])
            self._states.delete_topic_states(topic.name)
            self._heads.delete(topic.name, topic.queues)
            self._topics.remove(topic.name)
            log.info("purged deleted topic %s", topic.name)
            purged.append(topic.name)
        return purged

    def sweep_orphans(self) -> SweepReport:
        """Delete batch objects older than the grace period that no index item names."""
        cutoff = dt.datetime.fromtimestamp(self._clock() / 1000 - self._grace, tz=dt.UTC)
        indexed: dict[tuple[str, int], set[str]] = {}
        orphans: list[str] = []
        examined = deleted = 0
        for obj in self._objects.list(TOPICS_PREFIX):
            examined += 1
            match = KEY_PATTERN.match(obj.key)
            if not match or obj.last_modified > cutoff:
                continue
            stream = (match["topic"], int(match["queue"]))
            if stream not in indexed:
                indexed[stream] = {key for _, key in self._index.keys_of(*stream)}
            if obj.key not in indexed[stream]:
                orphans.append(obj.key)
            if len(orphans) >= DELETE_CHUNK:  # delete as it goes: a long sweep still progresses
                self._objects.delete(orphans)
                deleted, orphans = deleted + len(orphans), []
        self._objects.delete(orphans)
        deleted += len(orphans)
        if deleted:
            log.info("swept %d orphaned batch objects", deleted)
        return SweepReport(examined, deleted)
