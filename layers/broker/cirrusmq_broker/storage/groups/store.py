"""The group state store: one object over GroupsTable for the services, each concern in a
module of its own (summaries, leases, acks, move settles, subscriptions, whole-group scans);
an ack goes to its part directly (``store.acks.ack``).

Every item is small, so a write costs the same whatever is in flight. A receive writes the
summary (version check, optimistic concurrency) and the leases it creates or changes in one
transaction, or in one update when its only lease is the one stored on the summary
(codec.py); an ack is a conditional ``ADD`` to one lease item, which is deleted once settled
(an ack of everything delivered under a lease: one conditional delete), or the same on the
summary's attributes of the lease stored there. A move of leased messages (expiry, nack)
settles the lease in its append's transaction, conditional on the lease's id and version; a
lease deleted with messages moved on leaves a moved mark. Every lease delete and put is
conditional on the lease's id and version as read (versions restart at 1 in a new lease at
the same slot).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...rules.filters import Subscription
from ...rules.group_state import GroupQueueState, Lease
from ..dynamo import KeysToRead
from .lease_acks import LeaseAcks
from .leases import LeaseItems
from .move_settles import MoveSettles
from .scan import GroupScan
from .subscriptions import Subscriptions
from .summaries import Summaries


class GroupStateStore:
    def __init__(self, client: Any, table: str, *, leases_on_summary: bool = False) -> None:
        self._table = table
        self.leases = LeaseItems(client, table)
        self.summaries = Summaries(client, table, self.leases, leases_on_summary=leases_on_summary)
        self.moves = MoveSettles(client, table)
        self.acks = LeaseAcks(client, table, self.leases, self.moves)
        self.subscriptions = Subscriptions(client, table)
        self.scan = GroupScan(client, table)

    @property
    def table(self) -> str:
        return self._table

    # ------------------------------------------------------------------ summaries
    def load(self, group: str, topic: str, queues: Iterable[int]) -> dict[int, GroupQueueState]:
        """Consistent read of the summaries of ``queues`` (absent ones start fresh)."""
        return self.summaries.load(group, topic, queues)

    def load_one(self, group: str, topic: str, queue: int) -> GroupQueueState:
        return self.summaries.load(group, topic, [queue])[queue]

    def to_read(
        self, group: str, topic: str, queues: list[int], *, subscription: bool = True
    ) -> KeysToRead:
        return self.summaries.to_read(group, topic, queues, subscription=subscription)

    def parse(
        self, group: str, topic: str, queues: list[int], items: list[dict[str, Any]]
    ) -> tuple[dict[int, GroupQueueState], Subscription | None]:
        return self.summaries.parse(group, topic, queues, items)

    def save(self, state: GroupQueueState, extra_items: list[dict[str, Any]] | None = None) -> bool:
        """Write what ``state`` changed if nobody changed it since it was read (summaries.py)."""
        return self.summaries.save(state, extra_items)

    # ------------------------------------------------------------------ leases
    def load_leases(self, state: GroupQueueState) -> None:
        self.leases.load_leases(state)

    def load_lease(self, state: GroupQueueState, lease_id: str) -> Lease | None:
        return self.leases.load_lease(state, lease_id)

    def leases_covering_each(
        self, state: GroupQueueState, offsets: list[int]
    ) -> dict[int, list[Lease]]:
        return self.leases.leases_covering_each(state, offsets)

    # ------------------------------------------------------------------ moves
    def settle_requests(
        self, state: GroupQueueState, before: Lease, after: Lease
    ) -> list[dict[str, Any]]:
        return self.moves.settle_requests(state, before, after)

    def settle(self, state: GroupQueueState, before: Lease, after: Lease) -> bool:
        return self.moves.settle(state, before, after)

    def moved_marks(
        self, group: str, topic: str, queue: int, lease_ids: Iterable[str]
    ) -> dict[str, frozenset[int]]:
        return self.moves.moved_marks(group, topic, queue, lease_ids)

    def marks_to_read(
        self, group: str, topic: str, queue: int, lease_ids: Iterable[str]
    ) -> KeysToRead:
        return self.moves.marks_to_read(group, topic, queue, lease_ids)

    def parse_marks(
        self, topic: str, queue: int, lease_ids: Iterable[str], found: dict[str, list[Any]]
    ) -> dict[str, frozenset[int]]:
        return self.moves.parse_marks(topic, queue, lease_ids, found)

    # ------------------------------------------------------------------ subscriptions
    def subscribe(
        self, group: str, topic: str, subscription: Subscription, *, only_if_new: bool
    ) -> bool:
        return self.subscriptions.subscribe(group, topic, subscription, only_if_new=only_if_new)

    def subscription(self, group: str, topic: str) -> Subscription | None:
        return self.subscriptions.subscription(group, topic)

    # ------------------------------------------------------------------ whole groups
    def list_group(self, group: str) -> tuple[list[GroupQueueState], dict[str, Subscription]]:
        return self.scan.list_group(group)

    def delete_topic_states(self, topic: str) -> int:
        return self.scan.delete_topic_states(topic)
