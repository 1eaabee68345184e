"""Describe a consumer group: per queue its committed offset, cursor, what is in flight and
the oldest unacked message; and its subscriptions.

A queue of the group's retry topic of a subscribed topic (``retry.<group>.<topic>``, read by
that group only) that holds messages the group never read is described from offset 0, where
the group starts reading it (as the Lag metric counts it): a redrive's letters, say."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...model import GroupQueueStatus
from ...rules.filters import Subscription
from ...rules.group_state import GroupQueueState
from ...rules.retries import REDRIVE_QUEUE, retry_topic
from ...storage.groups import GroupStateStore
from ...storage.queue_heads import QueueHeads
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
        """Per queue the group consumed, and per queue of its retry topics holding messages
        it never read: committed offset, cursor, max offset, in flight (and how much of it
        is overdue), the oldest unacked offset with its delivery attempt; and the
        subscriptions. Given ``topic``, that topic's queues and subscription alone."""
        check_group_name(group)
        if topic is not None:
            check_topic_name(topic)
        states, subscriptions = self._states.list_group(group)
        states = [s for s in states if topic is None or s.topic == topic]
        # the group's retry topics (read by it only); asked about one topic, that one alone
        retries = {retry_topic(group, t) for t in subscriptions} if topic is None else set()
        queues: dict[str, set[int]] = {name: set(range(REDRIVE_QUEUE + 1)) for name in retries}
        for state in states:
            queues.setdefault(state.topic, set()).add(state.queue)
        heads = self._heads.get_of_topics({name: sorted(q) for name, q in queues.items()})
        read = {(s.topic, s.queue) for s in states}
        states += [  # a retry topic's queues holding messages the group never read
            GroupQueueState(group, name, queue)
            for name in sorted(retries)
            for queue, head in heads[name].items()
            if head.next_offset > 0 and not head.closed and (name, queue) not in read
        ]
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
