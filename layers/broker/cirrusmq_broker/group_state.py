"""A consumer group's state on one queue, and the pure rules that change it.

Per (group, topic, queue): everything below ``committed`` is settled; ``cursor`` is the
next offset to hand out; offsets in between are either acked or covered by a lease (handed
to a consumer until ``deadline``). Filtered-out offsets are recorded as acked when the
cursor passes them, so every offset below the cursor is acked or leased.

Lease ids change whenever a lease is redelivered or split, so receipt handles naming the
old lease become stale; only ``change_invisible`` keeps the lease (the old handle still acks).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace


def new_lease_id() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Lease:
    """Offsets [start, end) handed to a consumer, invisible to others until ``deadline``."""

    lease_id: str
    start: int
    end: int
    deadline: int
    """Milliseconds since the epoch."""
    attempt: int
    """Delivery attempt of the messages under this lease (1 = first delivery)."""
    moved: frozenset[int] = frozenset()
    """Offsets moved to a lease of their own by change_invisible."""

    def unsettled(self, acked: frozenset[int] | set[int]) -> list[int]:
        return [o for o in range(self.start, self.end) if o not in acked and o not in self.moved]


@dataclass
class GroupQueueState:
    """Working copy of one state item; ``version`` 0 means it is not stored yet."""

    group: str
    topic: str
    queue: int
    committed: int = 0
    cursor: int = 0
    cursor_base: int = 0
    """Base offset of the index batch holding ``cursor``: where the next index read starts."""
    leases: dict[str, Lease] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    version: int = 0

    # ------------------------------------------------------------------ reading
    def inflight(self) -> int:
        return sum(len(lease.unsettled(self.acked)) for lease in self.leases.values())

    def settled_offset(self) -> int:
        """The lowest offset not yet settled (what ``committed`` advances to)."""
        lowest = self.cursor
        for lease in self.leases.values():
            pending = lease.unsettled(self.acked)
            if pending:
                lowest = min(lowest, pending[0])
        return lowest

    def holds(self, lease_id: str, offset: int) -> bool:
        """Whether a handle (lease, offset) may still ack: its lease is live or it settled."""
        return bool(self.version) and (lease_id in self.leases or self.settled(offset))

    def settled(self, offset: int) -> bool:
        """Whether ``offset`` was acked (or skipped) already."""
        return offset < self.committed or offset in self.acked

    def oldest_unsettled(self) -> tuple[int, int] | None:
        """(offset, delivery attempt) of the lowest leased offset not yet acked."""
        oldest = None
        for lease in self.leases.values():
            pending = lease.unsettled(self.acked)
            if pending and (oldest is None or pending[0] < oldest[0]):
                oldest = (pending[0], lease.attempt)
        return oldest

    def expired_leases(self, now: int) -> list[Lease]:
        """Leases past their deadline with something left to deliver, oldest offsets first."""
        expired = [
            lease
            for lease in self.leases.values()
            if lease.deadline <= now and lease.unsettled(self.acked)
        ]
        return sorted(expired, key=lambda lease: lease.start)

    def _unused_id(self) -> str:
        while (lease_id := new_lease_id()) in self.leases:
            pass
        return lease_id

    # ------------------------------------------------------------------ changing
    def compact(self) -> None:
        """Advance ``committed``; trim leases and acked offsets below it, drop settled leases."""
        self.committed = committed = self.settled_offset()
        trimmed = (
            replace(
                lease, start=committed, moved=frozenset(o for o in lease.moved if o >= committed)
            )
            if lease.start < committed
            else lease
            for lease in self.leases.values()
        )
        self.acked = {o for o in self.acked if o >= committed}
        self.leases = {
            lease.lease_id: lease
            for lease in trimmed
            if lease.start < lease.end and lease.unsettled(self.acked)
        }

    def skip_to(self, offset: int) -> None:
        """Jump the cursor over offsets that no longer exist (retention expired them)."""
        if offset > self.cursor:
            self.cursor = self.cursor_base = offset

    def lease_new(
        self,
        end: int,
        *,
        delivered: Iterable[int],
        cursor_base: int,
        now: int,
        invisible_ms: int,
    ) -> Lease | None:
        """Hand out [cursor, end): ``delivered`` offsets are leased, the rest count as acked."""
        start, delivered_set = self.cursor, set(delivered)
        self.acked.update(o for o in range(start, end) if o not in delivered_set)
        self.cursor, self.cursor_base = end, cursor_base
        if not delivered_set:
            return None
        lease = Lease(self._unused_id(), start, end, now + invisible_ms, attempt=1)
        self.leases[lease.lease_id] = lease
        return lease

    def redeliver(self, lease: Lease, count: int, *, now: int, invisible_ms: int) -> Lease:
        """Lease again the first ``count`` unsettled offsets of an expired lease.

        The taken part becomes a new lease with the attempt increased; any remainder keeps
        its expiry under a new id. Both get new ids, so handles of the old lease are stale.
        """
        pending = lease.unsettled(self.acked)
        del self.leases[lease.lease_id]
        split = pending[count - 1] + 1 if count < len(pending) else lease.end
        taken = Lease(
            self._unused_id(),
            lease.start,
            split,
            now + invisible_ms,
            lease.attempt + 1,
            frozenset(o for o in lease.moved if o < split),
        )
        self.leases[taken.lease_id] = taken
        if split < lease.end:
            rest = replace(
                lease,
                lease_id=self._unused_id(),
                start=split,
                moved=frozenset(o for o in lease.moved if o >= split),
            )
            self.leases[rest.lease_id] = rest
        return taken

    def change_invisible(self, lease_id: str, offset: int, *, deadline: int) -> Lease | None:
        """Give one delivered message its own deadline; None if it is no longer leased.

        A lease holding just that message gets the new deadline in place; otherwise the
        message moves to a lease of its own.
        """
        lease = self.leases.get(lease_id)
        if lease is None or offset in self.acked or offset in lease.moved:
            return None
        if not lease.start <= offset < lease.end:
            return None
        if lease.unsettled(self.acked) == [offset]:
            self.leases[lease_id] = replace(lease, deadline=deadline)
            return self.leases[lease_id]
        self.leases[lease_id] = replace(lease, moved=lease.moved | {offset})
        single = Lease(self._unused_id(), offset, offset + 1, deadline, lease.attempt)
        self.leases[single.lease_id] = single
        return single
