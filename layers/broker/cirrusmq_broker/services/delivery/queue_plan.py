"""What one queue can deliver now: flow control, the FIFO gate, and the plan of a pass.

Flow control holds new messages back while a queue has too much in flight for the group
(``MAX_INFLIGHT_PER_QUEUE`` offsets or ``MAX_LEASES_PER_QUEUE`` leases). A FIFO queue serves
the client its lock and the allocation allow (orderly.py), per message group: expired
leases are redelivered in place, then the messages held for their group whose group no
lease holds any more, then new messages from the cursor; a new message of a group a lease
holds, or one not due yet (a not-before time), is held (group_state.py). On other
topics a group whose redelivery is immediate (SQS's visibility timeout) has its expired
leases redelivered in place, oldest first, before new messages; for other groups the
retries' lease expiry has moved them to the retry topic before the plan is made.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ... import limits
from ...model import IndexEntry, StoredMessage, Topic
from ...rules import orderly
from ...rules.filters import Filter
from ...rules.group_order import GroupRun, runs_of
from ...rules.group_state import MAX_HELD, GroupQueueState, Lease
from ...rules.membership import Membership
from ...rules.retries import deliveries
from ...storage.group_views import GroupView
from ...storage.groups import GroupStateStore
from ...storage.log_index import LogIndex
from ..batch_reader import BatchReader
from ..offset_lookup import OffsetLookup

MAX_SCAN_PER_QUEUE = 2000
"""Messages one receive examines per queue (bounds work when a filter skips most)."""
FLOW_RECHECK_SECONDS = 5.0
"""A queue at its flow-control limit has its leases re-read at most this often."""
FIFO_RECHECK_SECONDS = 1.0
"""A FIFO queue seen with a delivery in flight has its leases re-read at most this often
(an ack through the same process clears that at once)."""
FIFO_RECHECK_MAX_SECONDS = 2.0
"""... doubling up to this while the same delivery stays in flight (a slow orderly batch
does not cost a lease query per second for its whole invisible time)."""


@dataclass
class QueuePlan:
    """What one queue could deliver now."""

    redeliveries: list[tuple[Lease, list[StoredMessage]]] = field(default_factory=list)
    """Expired leases redelivered in place (FIFO, or immediate redelivery), with their
    messages: a prefix of each lease's unsettled offsets."""
    missing: dict[str, list[int]] = field(default_factory=dict)
    """Leased offsets past retention, by lease id: they settle without a delivery."""
    new: list[tuple[StoredMessage, bool]] = field(default_factory=list)
    """Messages from the cursor on, with whether they pass the filter."""
    unheld: list[StoredMessage] = field(default_factory=list)
    """FIFO: held messages (below the cursor) whose group no lease holds now, in order."""
    hold: set[int] = field(default_factory=set)
    """FIFO: offsets of ``new`` that pass the filter but wait for their group."""
    held_gone: list[int] = field(default_factory=list)
    """FIFO: held offsets past retention (they settle)."""
    waiting: bool = True
    """FIFO: every message it leaves held waits for a lease or its not-before time (none
    only for the budget)."""
    due_at: int | None = None
    """FIFO: the earliest not-before time of the messages it leaves held (ms; None: none
    waits for its time)."""
    skip_to: int = 0
    """Nothing retained lies below this offset: the cursor may jump here."""
    scan_end: int = 0
    """Offset after the last message examined."""
    entries: list[IndexEntry] = field(default_factory=list)

    def deliverable(self) -> list[StoredMessage]:
        again = [m for _, messages in self.redeliveries for m in messages]
        return again + self.unheld + self.fresh()

    def fresh(self) -> list[StoredMessage]:
        """The new messages to hand out: they pass the filter and wait for no group."""
        return [m for m, wanted in self.new if wanted and m.offset not in self.hold]

    def runs(self, queue: int) -> list[GroupRun]:
        """Per-group FIFO: what it could deliver, per message group (rules/group_order.py)."""
        again = [(lease.deadline, messages) for lease, messages in self.redeliveries]
        return runs_of(queue, again, self.unheld + self.fresh())

    def base_for(self, offset: int) -> int:
        """The base offset of the batch holding ``offset`` (itself at a batch boundary)."""
        for entry in self.entries:
            if entry.base_offset <= offset < entry.next_offset:
                return entry.base_offset
        return offset


@dataclass(frozen=True)
class _Busy:
    """A FIFO queue seen with nothing to hand out while deliveries are in flight."""

    until: float
    """Its leases are read again after this (``time.monotonic()``)."""
    deadline: int
    """The earliest deadline of its deliveries in flight (ms): it is served then anyway."""
    interval: float
    """The current re-read interval (s): doubles while the same delivery stays in flight."""
    held: frozenset[int] = frozenset()
    """The offsets held for their group then (each waiting for a lease)."""
    leases: frozenset[str] = frozenset()
    """The ids of the open leases then."""


@dataclass(frozen=True)
class _NotDue:
    """A FIFO queue seen with no lease open and every held message waiting for its
    not-before time (or behind one of its group)."""

    held: frozenset[int]
    """The offsets held then: the same summary (and no unread message) is skipped..."""
    due_at: int
    """... until this time (ms), when the earliest of them becomes due."""


_IDLE = _Busy(0.0, 0, 0.0)


def flow_bound(state: GroupQueueState) -> bool:
    """Whether flow control holds new messages back (exact once the leases are loaded)."""
    return (
        state.cursor - state.committed >= limits.MAX_INFLIGHT_PER_QUEUE
        or state.open_leases >= limits.MAX_LEASES_PER_QUEUE
    )


class QueuePlanner:
    def __init__(
        self,
        *,
        index: LogIndex,
        reader: BatchReader,
        lookup: OffsetLookup,
        states: GroupStateStore,
        clock: Callable[[], int],
    ) -> None:
        self._index = index
        self._reader = reader
        self._lookup = lookup
        self._states = states
        self._clock = clock
        self._lock = threading.Lock()
        self._flow_checked: dict[tuple[str, str, int], float] = {}
        """(group, topic, queue) → when its leases were last read for flow control (s)."""
        self._fifo_busy: dict[tuple[str, str, int], _Busy] = {}
        """FIFO queue → when it is served again while its deliveries stay in flight."""
        self._not_due: dict[tuple[str, str, int], _NotDue] = {}
        """FIFO queue → when its held messages become due, while no lease is open."""
        self._held_due: dict[tuple[str, str, int], _NotDue] = {}
        """FIFO queue → the earliest not-before time of its held messages, whether or not
        a lease is open (an empty receive names it as its due hint)."""

    def delivery_ended(self, group: str, topic: str, queue: int) -> None:
        """An ack settled a delivery of the queue: a FIFO queue may serve again at once."""
        with self._lock:
            self._fifo_busy.pop((group, topic, queue), None)

    def held_due_at(self, state: GroupQueueState) -> int | None:
        """FIFO: when the earliest message ``state`` holds for its not-before time becomes
        due (ms), as the last plan of the same held offsets found; None if unknown."""
        with self._lock:
            note = self._held_due.get((state.group, state.topic, state.queue))
        return note.due_at if note is not None and note.held == state.held else None

    def _flow_recheck(self, state: GroupQueueState) -> bool:
        """Whether a queue held by flow control may have its leases read again now.

        Acks do not touch the summary, so only the leases tell whether they freed room;
        reading them is rate-limited per queue, so a queue at its limit does not cost a
        lease query on every poll.
        """
        key = (state.group, state.topic, state.queue)
        now = self._clock() / 1000
        with self._lock:
            if now - self._flow_checked.get(key, -FLOW_RECHECK_SECONDS) < FLOW_RECHECK_SECONDS:
                return False
            self._flow_checked[key] = now
            if len(self._flow_checked) > 10_000:
                self._flow_checked.clear()
        return True

    def fifo_ready(
        self,
        view: GroupView,
        topic: Topic,
        queue: int,
        client_id: str | None,
        now: int,
        *,
        per_group: bool = False,
    ) -> bool:
        """Whether a FIFO queue may serve ``client_id`` now (its lock, the allocation, and
        something a delivery in flight does not hold back); reads the queue's leases when
        the summary cannot tell, at most every FIFO_RECHECK_SECONDS while a delivery is in
        flight and nothing but what it holds back waits: no new message (or no room to
        hold one), no message held for its group (an ack may have freed that group)."""
        state = view.states[queue]
        members = view.members or Membership(state.group)
        verdict = orderly.may_serve(state, client_id, members, topic.queues, now)
        if not verdict.allowed and (not verdict.in_flight_decides or state.complete):
            return False  # another consumer's queue: decided without reading leases
        unread = view.heads[queue].next_offset > state.cursor and len(state.held) < MAX_HELD
        if not unread and state.held and state.open_leases == 0:
            key = (state.group, state.topic, state.queue)
            with self._lock:
                hold = self._not_due.get(key)
            if hold is not None and hold.held == state.held and hold.due_at > now:
                return False  # nothing is due before then: no lookup of the held messages
        if not state.complete and state.open_leases > 0:
            key = (state.group, state.topic, state.queue)
            with self._lock:
                busy = self._fifo_busy.get(key, _IDLE)
            waiting = not unread and busy.held == state.held and busy.deadline > now
            if waiting and busy.until > time.monotonic():
                return False
            self._states.load_leases(state)
            state.refresh()
            if not unread and self._fifo_waits(state, now, state.held, per_group=per_group):
                return False
        return orderly.may_serve(state, client_id, members, topic.queues, now).allowed

    def _fifo_waits(
        self,
        state: GroupQueueState,
        now: int,
        held: frozenset[int] = frozenset(),
        *,
        planned: bool = False,
        saved: bool = False,
        due_at: int | None = None,
        per_group: bool = False,
    ) -> bool:
        """Whether a FIFO queue (leases loaded) has nothing to hand out but new messages:
        a delivery in flight, no expired lease it may redeliver, and its ``held`` offsets
        each waiting for a lease (``planned``: a plan found so; else the same leases are
        open as when a plan last found so). Then it is not served again before
        FIFO_RECHECK_SECONDS (doubling) or the delivery's deadline, unless an ack through
        this process ends a delivery first, or ``due_at`` (a held message's not-before
        time) comes."""
        live = [
            lease.deadline
            for lease in state.leases.values()
            if lease.unsettled() and lease.deadline > now
        ]
        if not live or _redeliverable(state, now, per_group):
            return False
        key = (state.group, state.topic, state.queue)
        open_ids = frozenset(x.lease_id for x in state.leases.values() if x.unsettled())
        with self._lock:
            if len(self._fifo_busy) > 10_000:
                self._fifo_busy.clear()
            busy = self._fifo_busy.get(key, _IDLE)
            if held and not planned and (busy.held != held or busy.leases != open_ids):
                return False  # a lease ended or changed: a held message may go now
            # the same delivery still in flight: re-read less often (acks through this
            # process clear the entry; the deadline ends the wait in any case)
            interval = (
                min(busy.interval * 2, FIFO_RECHECK_MAX_SECONDS)
                if busy.deadline == min(live)
                else FIFO_RECHECK_SECONDS
            )
            if saved:  # re-read at the next poll, then as after a first sighting
                until, interval = time.monotonic(), FIFO_RECHECK_SECONDS / 2
            else:
                until = time.monotonic() + interval
            deadline = min(live) if due_at is None else min(*live, due_at)
            self._fifo_busy[key] = _Busy(until, deadline, interval, held, open_ids)
        return True

    def plan(
        self,
        state: GroupQueueState,
        tag_filter: Filter,
        budget: int,
        now: int,
        end: int,
        *,
        fifo: bool = False,
        in_place_below: int | None = None,
        per_group: bool = False,
    ) -> QueuePlan:
        """What the queue of ``state`` could deliver now, up to ``budget`` messages before
        offset ``end`` (its head as read): on a FIFO topic per message group (the module
        doc), then new messages from the cursor unless flow control holds them.

        ``in_place_below`` (a group whose redelivery is immediate: its max delivery
        attempts): on other topics, expired leases are redelivered first, oldest first,
        up to a message whose deliveries reached it (the lease expiry moves that one to
        the dead letters first).

        ``per_group`` (FIFO, each group held on its own: SQS): a group's messages are
        visible up to its first one in flight (orderly.gate_by_group), and the plan lists
        every candidate of the page read, each group's up to ``budget``: the receive picks
        whole groups across queues (rules/group_order.py)."""
        if not state.complete and (
            (fifo and state.open_leases > 0)
            or state.may_have_expired(now)
            or (flow_bound(state) and self._flow_recheck(state))
        ):
            self._states.load_leases(state)  # the cheap bounds say: look at the leases
        state.refresh()  # acks since the last save may have freed flow control
        plan = self._plan(state, tag_filter, budget, now, end, fifo, in_place_below, per_group)
        if fifo and state.held and not plan.hold and not plan.deliverable():  # (no save)
            self.held_wait(state, plan, now, per_group=per_group)
        return plan

    def held_wait(
        self,
        state: GroupQueueState,
        plan: QueuePlan,
        now: int,
        *,
        saved: bool = False,
        per_group: bool = False,
    ) -> None:
        """After ``plan`` (FIFO), with ``state`` as planned (nothing to hand out) or as
        ``saved`` with what it handed out: if every held message waits for a lease, polls
        skip the queue for a while. After a save the next poll still reads the leases (a
        delivery just made is re-read as soon as one found in flight), but needs no
        lookup of its held messages while the same leases are open."""
        if not (plan.waiting and state.held):
            return
        key = (state.group, state.topic, state.queue)
        if plan.due_at is not None:
            with self._lock:
                if len(self._held_due) > 10_000:
                    self._held_due.clear()
                self._held_due[key] = _NotDue(state.held, plan.due_at)
        if plan.due_at is not None and state.open_leases == 0:
            with self._lock:
                if len(self._not_due) > 10_000:
                    self._not_due.clear()
                self._not_due[(state.group, state.topic, state.queue)] = _NotDue(
                    state.held, plan.due_at
                )
        elif state.complete:
            self._fifo_waits(
                state, now, state.held, planned=True, saved=saved, due_at=plan.due_at,
                per_group=per_group,
            )  # fmt: skip

    def _plan(
        self,
        state: GroupQueueState,
        tag_filter: Filter,
        budget: int,
        now: int,
        end: int,
        fifo: bool,
        in_place_below: int | None,
        per_group: bool = False,
    ) -> QueuePlan:
        plan = QueuePlan(scan_end=state.cursor)
        wanted = budget
        # FIFO: per message group, the expired leases no other lease holds a group of
        expired: list[Lease] = []
        held: frozenset[str] | None = frozenset()
        counts: dict[str, int] = {}
        if fifo and per_group:
            again, held = orderly.gate_by_group(state, now, budget)
            expired = [lease for lease, _ in again]
            counts = {lease.lease_id: count for lease, count in again}
        elif fifo:
            expired, held = orderly.gate(state, now)
        elif in_place_below is not None:
            expired = state.expired_leases(now)
        for lease in expired:
            if wanted <= 0:
                break
            pending = lease.unsettled()
            if per_group:  # each group's visible prefix, cut at the budget: all of it
                pending, wanted = pending[: counts[lease.lease_id]], budget
            looked_up = pending[: wanted + 64]
            found = self._lookup.messages_at(state.topic, state.queue, looked_up, now_s=now // 1000)
            if found.expired:
                plan.missing[lease.lease_id] = found.expired
            messages = [found.messages[o] for o in looked_up if o in found.messages][:wanted]
            if not fifo and in_place_below is not None:
                messages = _until_dead(messages, lease.attempt, in_place_below)
            plan.redeliveries.append((lease, messages))
            wanted = budget if per_group else wanted - len(messages)
        if fifo and held is None:
            return plan  # a lease holds every group: nothing else until it settles
        if fifo and state.held and wanted > 0:
            wanted, held = self._unhold(state, plan, held, wanted, now, per_group=per_group)
        if per_group:
            wanted = budget
        if wanted <= 0 or state.cursor >= end or flow_bound(state):
            return plan  # nothing new, or flow control: this queue waits for acks
        page = self._index.read_from(
            state.topic,
            state.queue,
            state.cursor_base,
            min(100, max(wanted, 8)),
            now_s=now // 1000,
            end=end,
        )
        cursor = state.cursor
        if page.floor > cursor:  # retention removed what lay between: skip it for good
            plan.skip_to = cursor = page.floor
        plan.entries, plan.scan_end = page.entries, cursor
        taking: frozenset[str] | None = frozenset()  # FIFO: the groups this delivery takes
        room = limits.MAX_INFLIGHT_PER_QUEUE - (cursor - state.committed)
        passing = 0  # per-group FIFO: the candidates scanned (each may be held)
        for entry in page.entries:
            if entry.base_offset >= end:
                break  # appended after the head was read (or not visible yet: retries)
            batch = self._reader.messages(entry)
            if not batch:  # the object is past retention already: skip its offsets
                plan.scan_end = entry.next_offset
                continue
            for message in batch[max(0, cursor - entry.base_offset) :]:
                if len(plan.new) >= min(MAX_SCAN_PER_QUEUE, room):
                    return plan
                passes = tag_filter.accepts(message)
                group = group_of(message)
                # once the budget is spent, the rest of this batch is still looked at while
                # its messages would wait anyway (their group is held or in this delivery):
                # holding them now spares a later read of the batch
                due = not_before(message, now) if fifo and passes else None
                waits = fifo and passes and (orderly.meets(group, held) or due is not None)
                if per_group:
                    # the whole page is a candidate (the receive picks whole groups), as
                    # long as the queue could hold every one the receive leaves
                    wanted = budget
                    if passes and len(state.held) + passing >= MAX_HELD:
                        return plan
                    passing += passes
                if wanted <= 0 and not (fifo and (waits or not passes)):
                    if not (fifo and passes and orderly.meets(group, taking)):
                        return plan
                    waits = True
                if waits and len(state.held) + len(plan.hold) >= MAX_HELD:
                    return plan  # holding no more: the cursor waits at this message
                plan.new.append((message, passes))
                plan.scan_end = message.offset + 1
                if waits:
                    plan.hold.add(message.offset)
                    if due is not None:  # not due yet: nothing after it of its group goes
                        held = orderly.joined(held, group)
                        plan.due_at = min(due, plan.due_at or due)
                elif passes:
                    wanted -= 1  # (later messages of its group may join this delivery)
                    taking = orderly.joined(taking, group)
            if wanted <= 0 and not per_group:
                return plan
        return plan

    def _unhold(
        self,
        state: GroupQueueState,
        plan: QueuePlan,
        held: frozenset[str] | None,
        wanted: int,
        now: int,
        *,
        per_group: bool = False,
    ) -> tuple[int, frozenset[str] | None]:
        """Plan the held messages whose group no lease holds now, in order, up to ``wanted``
        (``per_group``: up to ``wanted`` of each group); returns what is left of it, and the
        groups still held (a held message left waiting holds its group: nothing after it
        of that group may go first)."""
        taken: dict[str | None, int] = {}
        each = wanted
        offsets = sorted(state.held)
        found = self._lookup.messages_at(state.topic, state.queue, offsets, now_s=now // 1000)
        plan.held_gone = list(found.expired)
        for offset in offsets:
            message = found.messages.get(offset)
            if message is None:
                if offset not in found.expired:
                    held = None  # its group is unknown: nothing after it goes first
                continue
            group = group_of(message)
            due = not_before(message, now)
            room = each - taken.get(message.message_group, 0) if per_group else wanted
            if not orderly.meets(group, held):
                if due is not None:  # it waits for its time, and holds its group
                    plan.due_at = min(due, plan.due_at or due)
                elif room <= 0:
                    plan.waiting = False  # it waits for the budget only
                else:
                    plan.unheld.append(message)
                    wanted -= 1
                    taken[message.message_group] = taken.get(message.message_group, 0) + 1
                    continue
            held = orderly.joined(held, group)
        return wanted, held


def _redeliverable(state: GroupQueueState, now: int, per_group: bool) -> bool:
    """Whether a FIFO queue (leases loaded) has an expired lease to redeliver now."""
    if per_group:
        return any(count for _, count in orderly.gate_by_group(state, now, 1)[0])
    return bool(orderly.gate(state, now)[0])


def not_before(message: StoredMessage, now: int) -> int | None:
    """A FIFO message's not-before time while it is still ahead of ``now`` (ms), else None
    (a message sent with ``not_before`` carries it as its delivery timestamp)."""
    due = message.system.delivery_timestamp
    return due if due is not None and due > now else None


def group_of(message: StoredMessage) -> frozenset[str] | None:
    """The message group a FIFO message holds (None: without one, it holds every group)."""
    return frozenset([message.message_group]) if message.message_group is not None else None


def _until_dead(messages: list[StoredMessage], attempt: int, maximum: int) -> list[StoredMessage]:
    """The leading ``messages`` (delivered under a lease of ``attempt``) that have had
    fewer than ``maximum`` deliveries: one that reached it is a dead letter, never
    redelivered in place."""
    for position, message in enumerate(messages):
        if deliveries(message, attempt) >= maximum:
            return messages[:position]
    return messages
