"""Describe a consumer group: per queue its committed offset, cursor, what is in flight and
the oldest unacked message; and its subscriptions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...model import GroupQueueStatus
from ...rules.filters import Subscription
from ...storage.groups import GroupStateStore
from ...storage.queue_heads import QueueHead, QueueHeads
from ...validation import check_group_name, check_topic_name


@dataclass(frozen=True)
class GroupDescription:
    queues: list[GroupQueueStatus]
    subscriptions: dict[str, Subscription]
    """Topic → the group's filter on it."""


class GroupStatus:
    def __init__(
        self, *, states: GroupStateStore, heads: QueueHeads, clock: Callable[[], int]
    ) -> None:
        self._states = states
        self._heads = heads
        self._clock = clock

    def describe_group(self, group: str, topic: str | None = None) -> GroupDescription:
        """Per queue the group consumed: committed offset, cursor, max offset, in flight
        (and how much of it is overdue), the oldest unacked offset with its delivery
        attempt; and the subscriptions."""
        check_group_name(group)
        if topic is not None:
            check_topic_name(topic)
        states, subscriptions = self._states.list_group(group)
        states = [s for s in states if topic is None or s.topic == topic]
        heads: dict[str, dict[int, QueueHead]] = {}
        for name in {s.topic for s in states}:
            heads[name] = self._heads.get_many(name, [s.queue for s in states if s.topic == name])
        statuses = []
        now = self._clock()
        for state in states:
            oldest = state.oldest_unsettled()
            statuses.append(
                GroupQueueStatus(
                    topic=state.topic,
                    queue=state.queue,
                    committed_offset=state.settled_offset(),
                    cursor=state.cursor,
                    max_offset=heads[state.topic][state.queue].next_offset,
                    inflight=state.inflight(),
                    oldest_unacked_offset=oldest[0] if oldest else None,
                    oldest_unacked_attempt=oldest[1] if oldest else None,
                    overdue=state.overdue(now),
                )
            )
        if topic is not None:
            subscriptions = {t: f for t, f in subscriptions.items() if t == topic}
        return GroupDescription(sorted(statuses, key=lambda s: (s.topic, s.queue)), subscriptions)
