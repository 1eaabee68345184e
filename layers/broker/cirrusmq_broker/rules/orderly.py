"""Orderly (FIFO) consumption: pure rules for queue locks and per-queue sequencing.

Within a consumer group, a queue of a FIFO topic is served to one consumer at a time. The
lock lives on the group's summary item of the queue (``lock_owner``, ``lock_expiry``) and
is taken or renewed by the same conditional write that records a receive, so it costs no
call of its own. A lock counts as held while it has not expired, and while its owner is a
live member the queue is allocated to (heartbeats keep it); it is free at once when its
owner deregisters (the release clears it) or when the queue was allocated away from a live
owner that has nothing in flight on it (a rebalance).

Sequencing: a FIFO queue has at most one lease in flight per group. New messages are
handed out only when no lease is open; an expired lease is redelivered whole (attempt + 1)
to the lock owner before anything after it.
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


def gate(state: GroupQueueState, now: int) -> tuple[list[Lease], bool]:
    """What a FIFO queue may hand out now (leases loaded): (the one expired lease to
    redeliver, or none; whether new messages may follow the cursor)."""
    open_leases = [lease for lease in state.leases.values() if lease.unsettled()]
    if any(lease.deadline > now for lease in open_leases):
        return [], False  # a delivery is in flight: the queue waits for it
    expired = state.expired_leases(now)
    if expired:
        return expired[:1], False
    return [], True
