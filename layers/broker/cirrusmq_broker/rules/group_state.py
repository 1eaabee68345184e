"""A consumer group's state on one queue, and the pure rules that change it.

Per (group, topic, queue) a small summary: ``cursor`` is the next offset to hand out,
``committed`` a lower bound of the lowest unsettled offset, ``earliest_deadline`` a lower
bound of the open leases' deadlines and ``open_leases`` an upper bound of their number.
Each lease (offsets [start, end) handed to a consumer until ``deadline``) is stored on its
own, with the offsets of it settled so far; an offset below the cursor that no lease holds
unsettled, and that ``held`` does not name, is settled. So writing a summary or a lease costs
the same whatever is in flight. One lease per queue may be stored on the summary instead
(``inline``, marked in its id): a range lease of at most ``MAX_INLINE_SPAN`` offsets made
while no other was there, without message groups, where the deployment allows it. A
receive that finds the slot free then writes one item, and the ack of everything the lease
delivered one more. Its writes are fenced on its id and version as every lease's (an ack
or a move changes only its attributes, not the summary's version), so acks of it do not
make receives on the queue read again.

FIFO topics hold per message group: a lease records the message groups of what it delivered
(``groups``), and while a lease holds a group unsettled (in flight, or expired and waiting to
be redelivered in place), later messages of that group are not handed out. A receive that
passes over such a message leaves it in ``held`` (offsets below the cursor, on the summary,
bounded by ``MAX_HELD``) and hands out other groups' messages; a held message is handed out,
before anything after it of its group, once no lease holds its group. A message sent with a
not-before time (``MessageInput.not_before``) is held the same way until that time, and
holds its group meanwhile.

A lease's slot (its start, and whether it holds one message moved out by change_invisible)
names its stored item and is part of its id; the rest of the id changes whenever the lease
is redelivered or split, so receipt handles naming the old lease become stale. Only
``change_invisible`` keeps the lease (the old handle still acks).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

MAX_HELD = 100
"""Offsets a FIFO queue's summary holds back for their message group at most: a receive
that would hold more stops its scan there (the cursor waits)."""

LeaseSlot = tuple[int, bool]
"""(start, moved-out single message): where a lease is stored; unique among open leases."""

INLINE_MARK = "s"
"""Ends the offset part of the id of a lease stored on its queue's summary."""
MAX_INLINE_SPAN = 128
"""Offsets a lease stored on the summary spans at most: its settled offsets (acked, skipped
by a filter, moved) are stored there too, and every receive of the queue writes the summary,
so it stays near DynamoDB's 1 KB write unit; a wider lease is an item of its own."""


def is_inline(lease_id: str) -> bool:
    """Whether the lease ``lease_id`` is stored on its queue's summary (at most one lease
    of a queue is: a range lease made when no other was there) rather than in an item of
    its own."""
    return lease_id.partition(".")[0].endswith(INLINE_MARK)


def new_lease_id(slot: LeaseSlot, delivered: int, *, inline: bool = False) -> str:
    """A fresh id for a lease of ``slot`` whose handles are issued for ``delivered`` offsets.

    The count is part of the id, so it is as immutable as the id: an ack naming that many
    distinct offsets of the lease (handles are signed, so each is an offset delivered under
    it) settles the whole lease (:func:`delivered_count`). ``inline``: the lease is stored
    on its queue's summary (:func:`is_inline`), which the id says for the whole of its
    life, so an ack finds it without reading anything."""
    start, single = slot
    mark = "m" if single else INLINE_MARK if inline else ""
    return f"{start}{mark}.{secrets.token_hex(6)}n{delivered}"


def single_lease_id(parent_id: str, offset: int) -> str:
    """The id of the lease of its own that change_invisible gives ``offset`` of the lease
    ``parent_id``: derived from both, so an ack through the parent's handle names it."""
    token = hashlib.sha256(f"{parent_id}#{offset}".encode()).hexdigest()[:12]
    return f"{offset}m.{token}n1"


def delivered_count(lease_id: str) -> int | None:
    """How many offsets were delivered under ``lease_id``; None for an id without the count
    (made before it was recorded)."""
    match = re.fullmatch(r"[0-9]{1,20}[ms]?\.[0-9a-f]{12}n([0-9]{1,9})", lease_id)
    return int(match[1]) if match else None


def lease_slot(lease_id: str) -> LeaseSlot | None:
    """The slot a lease id names; None for an id this broker never made."""
    head, _, token = lease_id.partition(".")
    single = head.endswith("m")
    digits = head[:-1] if single or head.endswith(INLINE_MARK) else head
    if not token or not re.fullmatch(r"[0-9]{1,20}", digits):  # ASCII only ("²".isdigit())
        return None
    return int(digits), single


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
    acked: frozenset[int] = frozenset()
    """Offsets settled: acked, filtered out, or gone past retention."""
    gone: frozenset[int] = frozenset()
    """Offsets settled by moving them on (retry topic, dead letters): an ack of one is
    stale, the message comes back."""
    version: int = 0
    """Of the stored item (0: not stored yet); every stored change increases it."""
    groups: frozenset[str] | None = None
    """FIFO topics: the message groups of the messages delivered under this lease (None:
    not recorded, or a message without a group: the lease holds every group)."""

    @property
    def slot(self) -> LeaseSlot:
        return lease_slot(self.lease_id) or (self.start, False)

    @property
    def inline(self) -> bool:
        """Stored on its queue's summary, not in an item of its own."""
        return is_inline(self.lease_id)

    def unsettled(self) -> list[int]:
        return [o for o in range(self.start, self.end) if self.holds(o)]

    def holds(self, offset: int) -> bool:
        """Whether ``offset`` is delivered under this lease and not settled yet."""
        return (
            self.start <= offset < self.end
            and offset not in self.acked
            and offset not in self.moved
            and offset not in self.gone
        )

    def moved_on(self, forwarded: Iterable[int], expired: Iterable[int] = ()) -> Lease:
        """The lease once a move forwarded ``forwarded`` and settled ``expired`` (past
        retention) in one write fenced on this version: the stored lease after it (deleted
        when it has nothing unsettled left)."""
        return replace(
            self,
            gone=self.gone | frozenset(forwarded),
            acked=self.acked | frozenset(expired),
            version=self.version + 1,
        )


@dataclass
class GroupQueueState:
    """Working copy of one summary and, once loaded, of every open lease.

    ``version`` 0 means the summary is not stored yet (then no lease is either). Lease
    changes are recorded per slot (``touched``: slot → the lease as read, None if new) for
    the store to write.
    """

    group: str
    topic: str
    queue: int
    committed: int = 0
    cursor: int = 0
    cursor_base: int = 0
    """Base offset of the index batch holding ``cursor``: where the next index read starts."""
    earliest_deadline: int | None = None
    open_leases: int = 0
    version: int = 0
    leases: dict[str, Lease] = field(default_factory=dict)
    """Lease id → lease: every open lease if ``complete``, else those read so far."""
    complete: bool = False
    touched: dict[LeaseSlot, Lease | None] = field(default_factory=dict)
    held: frozenset[int] = frozenset()
    """FIFO topics: offsets below the cursor, neither settled nor leased, that wait for a
    lease of their message group to settle (see the module doc)."""
    stored: tuple[int, int, int, int | None, int, frozenset[int]] | None = None
    """The summary as stored (None: not stored)."""
    # --- orderly consumption (FIFO topics): the queue's lock, see orderly.py
    lock_owner: str | None = None
    """Client id holding the queue for the group (FIFO topics only)."""
    lock_expiry: int = 0
    """Milliseconds since the epoch: the lock lapses then unless renewed."""
    stored_lock: tuple[str | None, int] = (None, 0)
    """The lock as stored."""
    stored_inline: Lease | None = None
    """The lease stored on the summary as read (None: none was)."""
    leases_on_summary: bool = False
    """Whether a new lease may be stored on the summary (the deployment's choice)."""

    def __post_init__(self) -> None:
        if self.version == 0:
            self.complete = True  # nothing stored: no lease either
            self.stored = self.summary()

    # ------------------------------------------------------------------ reading
    def summary(self) -> tuple[int, int, int, int | None, int, frozenset[int]]:
        return (
            self.committed,
            self.cursor,
            self.cursor_base,
            self.earliest_deadline,
            self.open_leases,
            self.held,
        )

    def changed(self) -> bool:
        """Whether anything differs from what is stored."""
        return (
            bool(self.touched)
            or self.summary() != self.stored
            or (self.lock_owner, self.lock_expiry) != self.stored_lock
        )

    def inflight(self) -> int:
        return sum(len(lease.unsettled()) for lease in self.leases.values())

    def overdue(self, now: int) -> int:
        """Of :meth:`inflight`, the messages of leases past their deadline."""
        return sum(len(lease.unsettled()) for lease in self.expired_leases(now))

    def settled_offset(self) -> int:
        """The lowest offset not yet settled (``committed`` when every lease is loaded)."""
        lowest = min(self.held, default=self.cursor)
        for lease in self.leases.values():
            pending = lease.unsettled()
            if pending:
                lowest = min(lowest, pending[0])
        return lowest

    def oldest_unsettled(self) -> tuple[int, int] | None:
        """(offset, delivery attempt) of the lowest leased offset not yet acked."""
        oldest = None
        for lease in self.leases.values():
            pending = lease.unsettled()
            if pending and (oldest is None or pending[0] < oldest[0]):
                oldest = (pending[0], lease.attempt)
        return oldest

    def may_have_expired(self, now: int) -> bool:
        """Whether a lease may be past its deadline (the bound may be stale-low)."""
        return self.earliest_deadline is not None and self.earliest_deadline <= now

    def held_groups(self) -> frozenset[str] | None:
        """FIFO: the message groups the loaded leases hold unsettled (None: every group)."""
        groups: set[str] = set()
        for lease in self.leases.values():
            if lease.unsettled():
                if lease.groups is None:
                    return None
                groups |= lease.groups
        return frozenset(groups)

    def inline_lease(self) -> Lease | None:
        """The open lease stored on the summary, if any (it is read with the summary)."""
        return next((x for x in self.leases.values() if x.inline and x.unsettled()), None)

    def expired_leases(self, now: int) -> list[Lease]:
        """Loaded leases past their deadline with something left to deliver, oldest first."""
        expired = [
            lease for lease in self.leases.values() if lease.deadline <= now and lease.unsettled()
        ]
        return sorted(expired, key=lambda lease: lease.start)

    # ------------------------------------------------------------------ changing
    def _put(self, lease: Lease, *, replacing: Lease | None = None) -> None:
        """Record ``lease`` (new, or in place of ``replacing``, which shares its slot)."""
        if replacing is not None:
            del self.leases[replacing.lease_id]
        elif lease.slot not in self.touched:
            self.open_leases += 1
        self.touched.setdefault(lease.slot, replacing)
        self.leases[lease.lease_id] = lease
        if lease.unsettled():
            deadline = lease.deadline
            if self.earliest_deadline is None or deadline < self.earliest_deadline:
                self.earliest_deadline = deadline

    def refresh(self) -> None:
        """Drop settled leases and, once every lease is loaded, make the bounds exact."""
        for lease in [x for x in self.leases.values() if not x.unsettled()]:
            del self.leases[lease.lease_id]
            self.touched.setdefault(lease.slot, lease)
        if not self.complete and self.open_leases > 0:
            return
        self.committed = self.settled_offset()
        self.open_leases = len(self.leases)
        deadlines = [lease.deadline for lease in self.leases.values()]
        self.earliest_deadline = min(deadlines) if deadlines else None

    def after_move(self, lease: Lease) -> None:
        """Take in ``lease`` as written by a move outside :meth:`save` (same slot): a
        settled one is gone from the store already."""
        for old in [x for x in self.leases.values() if x.slot == lease.slot]:
            del self.leases[old.lease_id]
        if lease.unsettled():
            self.leases[lease.lease_id] = lease
        if lease.inline:
            self.stored_inline = lease if lease.unsettled() else None

    def skip_to(self, offset: int) -> None:
        """Jump the cursor over offsets that no longer exist (retention expired them)."""
        if offset > self.cursor:
            self.cursor = self.cursor_base = offset
        self.held = frozenset(o for o in self.held if o >= offset)

    def release(self, offsets: Iterable[int]) -> None:
        """FIFO: ``offsets`` no longer wait for their group (handed out, or gone)."""
        self.held = self.held - frozenset(offsets)

    def settle(self, lease_id: str, offsets: Iterable[int]) -> None:
        """Count ``offsets`` of a loaded lease as settled (they are past retention)."""
        lease = self.leases[lease_id]
        self._put(replace(lease, acked=lease.acked | set(offsets)), replacing=lease)

    def lease_new(
        self,
        end: int,
        *,
        delivered: Iterable[int],
        cursor_base: int,
        now: int,
        invisible_ms: int,
        hold: Iterable[int] = (),
        groups: frozenset[str] | None = None,
    ) -> Lease | None:
        """Hand out [cursor, end): ``delivered`` offsets are leased, ``hold`` wait for their
        message group (FIFO), the rest count as settled.

        FIFO (``groups``: the delivered messages' groups): ``delivered`` may name held
        offsets below the cursor too; the lease spans the offsets delivered, from the first
        (so its start names no other lease's slot) to the last: an offset it passes over
        is not its own (in its ``acked``), held or leased elsewhere or settled."""
        start, delivered_set = self.cursor, set(delivered)
        self.cursor, self.cursor_base = end, cursor_base
        self.held = (self.held - delivered_set) | frozenset(hold)
        if not delivered_set:
            return None
        if groups is not None:
            start, end = min(delivered_set), max(delivered_set) + 1
        return self._lease(delivered_set, start, end, now + invisible_ms, groups)

    def lease_groups(
        self,
        end: int,
        *,
        deliveries: list[tuple[frozenset[str] | None, list[int]]],
        cursor_base: int,
        now: int,
        invisible_ms: int,
        hold: Iterable[int] = (),
    ) -> dict[int, Lease]:
        """FIFO, each message group held on its own: as :meth:`lease_new`, but one lease per
        entry of ``deliveries`` (the groups of its messages, their offsets), so settling one
        group's messages frees that group while the others stay held. Returns offset →
        the lease it is delivered under."""
        delivered = {o for _, offsets in deliveries for o in offsets}
        self.cursor, self.cursor_base = end, cursor_base
        self.held = (self.held - delivered) | frozenset(hold)
        leased: dict[int, Lease] = {}
        for groups, offsets in deliveries:
            if offsets:
                first, last = min(offsets), max(offsets) + 1
                lease = self._lease(set(offsets), first, last, now + invisible_ms, groups)
                leased.update((o, lease) for o in offsets)
        return leased

    def _lease(
        self,
        delivered: set[int],
        start: int,
        end: int,
        deadline: int,
        groups: frozenset[str] | None,
    ) -> Lease:
        """A new lease of [start, end) delivering ``delivered`` (the offsets it passes over
        are not its own: in its ``acked``), recorded."""
        skipped = frozenset(o for o in range(start, end) if o not in delivered)
        slot = (start, False)
        inline = (
            self.leases_on_summary
            and groups is None
            and end - start <= MAX_INLINE_SPAN
            and self.inline_lease() is None
        )
        lease = Lease(
            new_lease_id(slot, len(delivered), inline=inline),
            start,
            end,
            deadline,
            1,
            acked=skipped,
            groups=groups,
        )
        self._put(lease)
        return lease

    def redeliver(self, lease_id: str, count: int, *, now: int, invisible_ms: int) -> Lease:
        """Lease again the first ``count`` unsettled offsets of an expired lease.

        The taken part becomes a lease in the same slot with the attempt increased; any
        remainder keeps its expiry in a slot of its own. Both get new ids, so handles of the
        old lease are stale.
        """
        lease = self.leases[lease_id]
        pending = lease.unsettled()
        split = pending[count - 1] + 1 if count < len(pending) else lease.end
        taken = replace(
            lease,
            lease_id=new_lease_id(
                lease.slot, min(count, len(pending)), inline=lease.inline and self.leases_on_summary
            ),
            end=split,
            deadline=now + invisible_ms,
            attempt=lease.attempt + 1,
            moved=frozenset(o for o in lease.moved if o < split),
            acked=frozenset(o for o in lease.acked if o < split),
            gone=frozenset(o for o in lease.gone if o < split),
        )
        self._put(taken, replacing=lease)
        if split < lease.end:
            # a lease recording its groups (FIFO) may span offsets of other leases: its rest
            # starts at its own next offset, which names no other lease's slot
            start = pending[count] if lease.groups is not None else split
            slot = (start, False)
            rest = Lease(
                new_lease_id(slot, 0),  # nothing delivered under it: it is redelivered later
                start,
                lease.end,
                lease.deadline,
                lease.attempt,
                frozenset(o for o in lease.moved if o >= start),
                frozenset(o for o in lease.acked if o >= start),
                frozenset(o for o in lease.gone if o >= start),
                groups=lease.groups,
            )
            self._put(rest)
        return taken

    def change_invisible(
        self, lease_id: str, offset: int, *, deadline: int, whole: bool = False
    ) -> Lease | None:
        """Give one delivered message its own deadline; None if it is no longer leased.

        The lease must be loaded. A lease holding just that message gets the new deadline in
        place; otherwise the message moves to a lease of its own. ``whole`` (FIFO topics:
        a queue's messages stay together, in order) sets the whole lease's deadline in place.
        """
        lease = self.leases.get(lease_id)
        if lease is None or not lease.holds(offset):
            return None
        if whole or lease.unsettled() == [offset]:
            return self.postpone(lease_id, deadline)
        self._put(replace(lease, moved=lease.moved | {offset}), replacing=lease)
        single = Lease(
            single_lease_id(lease.lease_id, offset),
            offset,
            offset + 1,
            deadline,
            lease.attempt,
            groups=lease.groups,  # FIFO: it holds the groups its lease held, no other
        )
        self._put(single)
        return single

    def postpone(self, lease_id: str, deadline: int) -> Lease:
        """Give the loaded lease ``lease_id`` a new deadline, in place (same id: its handles
        stay valid); returns the lease as changed."""
        lease = self.leases[lease_id]
        changed = replace(lease, deadline=deadline)
        self._put(changed, replacing=lease)
        return changed
