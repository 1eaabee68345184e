"""Per consumer group and topic: lag, age of the oldest unacked message, messages in flight;
per group: dead letters. Read once a minute by the GroupMetricsFunction, which emits them.

AWS calls per run: one Scan of the groups index (a page per MB of group-queue keys); with a
group, one Scan of the topics table (the queues of each topic; a page per MB); then per group
one Query of its items (states, leases, dead-letter marks; a page per MB) and one
BatchGetItem of its topics' queue heads, its dead-letter queue's head and its dead-letter
marks (one more per 100 keys), then one Query of the log index per queue holding an unacked
message (for its time). No group: one call. A caught-up group: two, plus the topics Scan.

A queue of a subscribed topic the group never touched counts from offset 0, where the group
would start reading it; so does a queue of the group's retry topic of a subscribed topic
(``retry.<group>.<topic>``, read by that group only), e.g. the redrive queue a dead-letter
redrive appended to before the group ever read its retry topic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..model import Topic, TopicStatus
from ..rules.group_state import GroupQueueState
from ..rules.retries import dlq_topic, retry_topic
from ..storage.group_catalog import GroupCatalog
from ..storage.groups import GroupStateStore
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHead
from ..storage.topics import TopicStore

DLQ_QUEUE = 0
"""The dead-letter topic's one queue."""


@dataclass(frozen=True)
class TopicLag:
    """How far one group is behind on one topic (summed / maximal over its queues)."""

    group: str
    topic: str
    lag: int
    """Messages stored and not yet acked (delivered or not)."""
    in_flight: int
    """Messages delivered and not yet acked."""
    oldest_unacked_age_s: float | None
    """Seconds since the oldest unacked message was stored (None: nothing unacked, or it
    passed retention)."""


@dataclass(frozen=True)
class GroupMetrics:
    group: str
    topics: list[TopicLag]
    dead_letters: int
    """Dead letters neither purged nor passed by a redrive of all."""


class GroupMetricsService:
    def __init__(
        self,
        *,
        catalog: GroupCatalog,
        states: GroupStateStore,
        topics: TopicStore,
        index: LogIndex,
        clock: Callable[[], int],
    ) -> None:
        self._catalog = catalog
        self._states = states
        self._topics = topics
        self._index = index
        self._clock = clock

    def collect(self) -> list[GroupMetrics]:
        """Every group's metrics (none, after one call, when there is no group)."""
        names = sorted(self._catalog.groups())
        if not names:
            return []
        topics = {t.name: t for t in self._topics.list()}
        return [self.group(name, topics) for name in names]

    def group(self, group: str, topics: dict[str, Topic]) -> GroupMetrics:
        """One group's metrics (``topics``: every topic by name, for their queue counts)."""
        states, subscriptions = self._states.list_group(group)
        by_topic: dict[str, dict[int, GroupQueueState]] = {t: {} for t in subscriptions}
        for name in subscriptions:  # the group's own retry topics: read by it only
            retry = topics.get(retry_topic(group, name))
            if retry is not None and retry.status is TopicStatus.ACTIVE:
                by_topic.setdefault(retry.name, {})
        for state in states:
            by_topic.setdefault(state.topic, {})[state.queue] = state
        for name, queue_states in by_topic.items():
            topic = topics.get(name)
            if topic is not None and topic.status is TopicStatus.ACTIVE:
                for queue in range(topic.queues):  # untouched queues start at offset 0
                    queue_states.setdefault(queue, GroupQueueState(group, name, queue))
        by_topic = {
            name: queue_states
            for name, queue_states in by_topic.items()
            if queue_states and (name not in topics or topics[name].status is TopicStatus.ACTIVE)
        }
        dlq = dlq_topic(group)
        queues = [(t, q) for t, queue_states in by_topic.items() for q in queue_states]
        queues.append((dlq, DLQ_QUEUE))
        read = self._catalog.heads_and_marks(group, queues)
        now = self._clock()
        topics = [
            self._topic_lag(group, topic, list(queue_states.values()), read.heads, now)
            for topic, queue_states in sorted(by_topic.items())
        ]
        dead = max(0, read.heads[(dlq, DLQ_QUEUE)].next_offset - read.marks.cursor("*"))
        return GroupMetrics(group, topics, dead)

    def _topic_lag(
        self,
        group: str,
        topic: str,
        states: list[GroupQueueState],
        heads: dict[tuple[str, int], QueueHead],
        now: int,
    ) -> TopicLag:
        lag = in_flight = 0
        oldest: float | None = None
        for state in sorted(states, key=lambda s: s.queue):
            settled = state.settled_offset()
            behind = max(0, heads[(topic, state.queue)].next_offset - settled)
            lag += behind
            in_flight += state.inflight()
            if behind:
                entry = self._index.entry_holding(topic, state.queue, settled, now_s=now // 1000)
                if entry is not None:
                    age = max(0.0, (now - entry.stored_timestamp) / 1000)
                    oldest = age if oldest is None else max(oldest, age)
        return TopicLag(group, topic, lag, in_flight, oldest)


__all__ = ["GroupMetrics", "GroupMetricsService", "TopicLag"]
