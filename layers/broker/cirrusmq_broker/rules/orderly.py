"""Orderly (FIFO) consumption: pure rules for queue locks and per-queue sequencing.

Within a consumer group, a queue of a FIFO topic is served to one consumer at a time. The
lock lives on the group's summary item of the queue (``lock_owner``, ``lock_expiry``) and
is taken or renewed by the same conditional write that records a receive, so it costs no
call of its own. A lock counts as held while it has not expired, and while its owner is a
live member the queue is allocated to (heartbeats keep it); it is free at once when its
owner deregisters (the release clears it) or when the queue was allocated away from a live
owner that has nothing in flight on it (a rebalance).

Sequencing is per message group (a lease records the groups it delivered, see
group_state.py): while a lease holds a group unsettled, in flight or expired, no later
message of that group is handed out; other groups' messages of the queue flow. An expired
lease is redelivered whole (attempt + 1), to the lock owner, before anything after it of
its groups. A lease without recorded groups holds every group of its queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from .group_state import GroupQueueState, Lease
from .membership import Membership

LOCK_SECONDS = 30
"""A lock lives this long after the receive that took or renewed it (at least as long as
the lease that receive handed out)."""


def lock_expiry(now: int, invisible_ms: int) -> int:
    return now + max(LOCK_SECONDS * 1000, invisible_ms)


def in_flight(state: GroupQueueState) -> bool:
    """Whether a lease holds unsettled messages (exact once the leases are loaded)."""
    if not state.complete:
        return state.open_leases > 0
    return any(lease.unsettled() for lease in state.leases.values())


@dataclass(frozen=True)
class Verdict:
    """Whether a client may be served a FIFO queue now, and if not, why."""

    allowed: bool
    reason: str = ""
    in_flight_decides: bool = False
    """Refused only because a delivery may be in flight: exact leases may allow it."""


def may_serve(
    state: GroupQueueState,
    client_id: str | None,
    membership: Membership,
    queues: int,
    now: int,
) -> Verdict:
    """Whether ``client_id`` (None: an anonymous receive) may receive from ``state``'s queue.

    A client that is a live member subscribed to the topic receives only from its
    allocated queues; others (anonymous, or never registered) take any queue whose lock is
    free. ``state``'s leases must be loaded when the answer depends on what is in flight.
    """
    allocated = membership.allocated(state.topic, queues, client_id, now)
    if allocated is not None and state.queue not in allocated:
        return Verdict(False, "allocated to another consumer")
    owner = state.lock_owner
    if owner is None or owner == client_id:
        return Verdict(True)
    if membership.is_live(owner, now):
        owner_share = membership.allocated(state.topic, queues, owner, now)
        if owner_share is not None and state.queue in owner_share:
            return Verdict(False, "locked by its live owner")
        if owner_share is not None:
            if not in_flight(state):
                return Verdict(True)  # rebalanced away and idle: take it over at once
            if state.lock_expiry > now:
                return Verdict(False, "its previous owner has a delivery in flight", True)
    if state.lock_expiry > now:
        return Verdict(False, "locked")
    return Verdict(True)


def take_lock(state: GroupQueueState, client_id: str, now: int, invisible_ms: int) -> None:
    """Make ``client_id`` the owner until the new expiry."""
    state.lock_owner = client_id
    state.lock_expiry = lock_expiry(now, invisible_ms)


def gate(state: GroupQueueState, now: int) -> tuple[list[Lease], frozenset[str] | None]:
    """What a FIFO queue may hand out now (leases loaded): (the expired leases to redeliver
    in place, oldest first: one holding a group that a live or older lease holds too waits
    for it; the message groups every open lease holds, None for every group: new and held
    messages of those wait)."""
    held: frozenset[str] | None = frozenset()
    for lease in state.leases.values():
        if lease.unsettled() and lease.deadline > now:
            held = joined(held, lease.groups)
    again = []
    for lease in state.expired_leases(now):
        if not meets(lease.groups, held):
            again.append(lease)
        held = joined(held, lease.groups)
    return again, held


def meets(groups: frozenset[str] | None, held: frozenset[str] | None) -> bool:
    """Whether messages of ``groups`` wait for ``held`` (None: every group)."""
    if groups is None:
        return held is None or bool(held)
    return held is None or bool(groups & held)


def joined(held: frozenset[str] | None, groups: frozenset[str] | None) -> frozenset[str] | None:
    """``held`` with ``groups`` (None: every group)."""
    return None if held is None or groups is None else held | groups


def message_groups(groups: list[str | None]) -> frozenset[str] | None:
    """The groups a delivery of messages of ``groups`` holds (a message without one: all)."""
    return None if None in groups else frozenset(g for g in groups if g is not None)


def gate_by_group(
    state: GroupQueueState, now: int, budget: int
) -> tuple[list[tuple[Lease, int]], frozenset[str] | None]:
    """What a FIFO queue may hand out now when each message group is held on its own and
    each message has its own visibility (SQS's FIFO queues; leases loaded).

    A group's unsettled messages, in offset order, are visible up to the first one in
    flight: that prefix (at most ``budget`` of it) is redelivered in place. Returns (each
    expired lease with how many of its first unsettled offsets to redeliver; the groups
    whose later messages wait: a group with a message in flight or past the budget, None
    for every group).

    A lease recording one group is judged per offset. One recording several groups, or
    none, is judged whole as :func:`gate` does, and holds its groups meanwhile."""
    offsets: dict[str, list[tuple[int, bool, Lease]]] = {}
    mixed: list[Lease] = []
    for lease in state.leases.values():
        pending = lease.unsettled()
        if not pending:
            continue
        if lease.groups is not None and len(lease.groups) == 1:
            (group,) = lease.groups
            live = lease.deadline > now
            offsets.setdefault(group, []).extend((o, live, lease) for o in pending)
        else:
            mixed.append(lease)
    held: frozenset[str] | None = frozenset()
    for lease in mixed:
        if lease.deadline > now:
            held = joined(held, lease.groups)
    again: list[tuple[Lease, int]] = []
    for lease in sorted((x for x in mixed if x.deadline <= now), key=lambda x: x.start):
        groups = lease.groups
        clash = groups is None or bool(groups & offsets.keys())
        if not clash and not meets(groups, held):
            again.append((lease, len(lease.unsettled())))
        held = joined(held, groups)
    counts: dict[str, tuple[Lease, int]] = {}
    for group, entries in offsets.items():
        entries.sort(key=lambda entry: entry[0])
        visible = 0
        while visible < min(len(entries), budget) and not entries[visible][1]:
            visible += 1
        if held is None or group in held:
            visible = 0  # a lease of several groups holds it
        if visible < len(entries):
            held = joined(held, frozenset([group]))
        for _, _, lease in entries[:visible]:
            taken = counts.get(lease.lease_id, (lease, 0))[1]
            counts[lease.lease_id] = (lease, taken + 1)
    again += sorted(counts.values(), key=lambda entry: entry[0].unsettled()[0])
    return again, held
