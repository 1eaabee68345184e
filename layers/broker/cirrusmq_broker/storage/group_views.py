"""What one receive poll reads: the heads of the topic's queues (all of them, or those asked
for), the group's states on them and its subscription, in one batched call (two past 49
queues: AWS reads at most 100 keys per call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..rules.filters import Subscription
from ..rules.group_state import GroupQueueState
from ..rules.membership import Membership
from .consumer_registry import ConsumerRegistry
from .dynamo import KeysToRead, batch_get
from .groups import GroupStateStore
from .queue_heads import QueueHead, QueueHeads


@dataclass
class GroupView:
    """Heads, the group's states and its subscription on one topic.

    Read eventually consistent (half the read units): a state that was stale is caught by
    the version condition of the write that follows.
    """

    group: str
    heads: dict[int, QueueHead]
    states: dict[int, GroupQueueState]
    subscription: Subscription | None
    members: Membership | None = None
    """The group's consumers (read when asked for: orderly receives of FIFO topics)."""

    def add(self, other: GroupView) -> None:
        """Take in the heads and states of queues read later (the subscription and the
        members stay as first read)."""
        self.heads.update(other.heads)
        self.states.update(other.states)


class GroupViewReader:
    def __init__(
        self,
        client: Any,
        heads: QueueHeads,
        states: GroupStateStore,
        registry: ConsumerRegistry | None = None,
    ) -> None:
        self._client = client
        self._heads = heads
        self._states = states
        self._registry = registry

    def read(
        self,
        group: str,
        topic: str,
        queues: int,
        *,
        members: bool = False,
        only: list[int] | None = None,
        subscription: bool = True,
    ) -> GroupView:
        """The view of the topic's ``queues`` (or of the queues ``only`` names); without
        ``subscription`` the subscription is not read (the view holds None)."""
        wanted = list(range(queues)) if only is None else list(only)
        heads_read = self._heads.to_read(topic, wanted)
        states_read = self._states.to_read(group, topic, wanted, subscription=subscription)
        if members and self._registry is not None:  # same table: one more key in the batch
            registry_key = self._registry.to_read(group).keys
            states_read = KeysToRead(states_read.table, [*states_read.keys, *registry_key])
        found = batch_get(self._client, [heads_read, states_read])
        items = found[states_read.table]
        states, subscription = self._states.parse(group, topic, wanted, items)
        membership = (
            self._registry.parse(group, items) if members and self._registry is not None else None
        )
        return GroupView(
            group,
            self._heads.parse(topic, wanted, found[heads_read.table]),
            states,
            subscription,
            membership,
        )
