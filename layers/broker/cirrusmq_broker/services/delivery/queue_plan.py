"""What one queue can deliver now: flow control, the FIFO gate, and the plan of a pass.

Flow control holds new messages back while a queue has too much in flight for the group
(``MAX_INFLIGHT_PER_QUEUE`` offsets or ``MAX_LEASES_PER_QUEUE`` leases). A FIFO queue serves
one delivery at a time, to the client its lock and the allocation allow (orderly.py): the
oldest expired lease is redelivered in place, else new messages follow the cursor. On other
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
from ...rules.group_state import GroupQueueState, Lease
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
    skip_to: int = 0
    """Nothing retained lies below this offset: the cursor may jump here."""
    scan_end: int = 0
    """Offset after the last message examined."""
    entries: list[IndexEntry] = field(default_factory=list)

    def deliverable(self) -> list[StoredMessage]:
        again = [m for _, messages in self.redeliveries for m in messages]
        return again + [m for m, wanted in self.new if wanted]

    def base_for(self, offset: int) -> int:
        """The base offset of the batch holding ``offset`` (itself at a batch boundary)."""
        for entry in self.entries:
            if entry.base_offset <= offset < entry.next_offset:
                return entry.base_offset
        return offset


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
        self._fifo_busy: dict[tuple[str, str, int], tuple[float, int, float]] = {}
        """FIFO queue → (re-read its leases after (monotonic), the delivery's deadline (ms),
        the current re-read interval (s): doubles while the same delivery stays in flight)."""

    def delivery_ended(self, group: str, topic: str, queue: int) -> None:
        """An ack settled a delivery of the queue: a FIFO queue may serve again at once."""
        with self._lock:
            self._fifo_busy.pop((group, topic, queue), None)

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
        self, view: GroupView, topic: Topic, queue: int, client_id: str | None, now: int
    ) -> bool:
        """Whether a FIFO queue may serve ``client_id`` now (its lock, the allocation, and
        no delivery in flight); reads the queue's leases when the summary cannot tell,
        at most every FIFO_RECHECK_SECONDS while a delivery is in flight."""
        state = view.states[queue]
        members = view.members or Membership(state.group)
        verdict = orderly.may_serve(state, client_id, members, topic.queues, now)
        if not verdict.allowed and (not verdict.in_flight_decides or state.complete):
            return False  # another consumer's queue: decided without reading leases
        if not state.complete and state.open_leases > 0:
            key = (state.group, state.topic, state.queue)
            with self._lock:
                until, deadline, interval = self._fifo_busy.get(key, (0.0, 0, 0.0))
                if until > time.monotonic() and deadline > now:
                    return False
            self._states.load_leases(state)
            state.refresh()
            live = [
                lease.deadline
                for lease in state.leases.values()
                if lease.unsettled() and lease.deadline > now
            ]
            if live:
                with self._lock:
                    if len(self._fifo_busy) > 10_000:
                        self._fifo_busy.clear()
                    # the same delivery still in flight: re-read less often (acks through
                    # this process clear the entry; the deadline ends the wait in any case)
                    interval = (
                        min(interval * 2, FIFO_RECHECK_MAX_SECONDS)
                        if deadline == min(live)
                        else FIFO_RECHECK_SECONDS
                    )
                    self._fifo_busy[key] = (time.monotonic() + interval, min(live), interval)
                return False
        return orderly.may_serve(state, client_id, members, topic.queues, now).allowed

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
    ) -> QueuePlan:
        """What the queue of ``state`` could deliver now, up to ``budget`` messages before
        offset ``end`` (its head as read): on a FIFO topic the expired lease the gate lets
        through, then new messages from the cursor unless flow control holds them.

        ``in_place_below`` (a group whose redelivery is immediate: its max delivery
        attempts): on other topics, expired leases are redelivered first, oldest first,
        up to a message whose deliveries reached it (the lease expiry moves that one to
        the dead letters first)."""
        if not state.complete and (
            (fifo and state.open_leases > 0)
            or state.may_have_expired(now)
            or (flow_bound(state) and self._flow_recheck(state))
        ):
            self._states.load_leases(state)  # the cheap bounds say: look at the leases
        state.refresh()  # acks since the last save may have freed flow control
        plan = QueuePlan(scan_end=state.cursor)
        wanted = budget
        # one delivery in flight per FIFO queue: the oldest expired one, else new ones
        expired, allow_new = [], True
        if fifo:
            expired, allow_new = orderly.gate(state, now)
        elif in_place_below is not None:
            expired = state.expired_leases(now)
        for lease in expired:
            if wanted <= 0:
                break
            looked_up = lease.unsettled()[: wanted + 64]
            found = self._lookup.messages_at(state.topic, state.queue, looked_up, now_s=now // 1000)
            if found.expired:
                plan.missing[lease.lease_id] = found.expired
            messages = [found.messages[o] for o in looked_up if o in found.messages][:wanted]
            if not fifo and in_place_below is not None:
                messages = _until_dead(messages, lease.attempt, in_place_below)
            plan.redeliveries.append((lease, messages))
            wanted -= len(messages)
        if not allow_new or wanted <= 0 or state.cursor >= end or flow_bound(state):
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
        room = limits.MAX_INFLIGHT_PER_QUEUE - (cursor - state.committed)
        for entry in page.entries:
            if entry.base_offset >= end:
                break  # appended after the head was read (or not visible yet: retries)
            batch = self._reader.messages(entry)
            if not batch:  # the object is past retention already: skip its offsets
                plan.scan_end = entry.next_offset
                continue
            for message in batch[max(0, cursor - entry.base_offset) :]:
                if wanted <= 0 or len(plan.new) >= min(MAX_SCAN_PER_QUEUE, room):
                    return plan
                passes = tag_filter.accepts(message)
                plan.new.append((message, passes))
                plan.scan_end = message.offset + 1
                wanted -= passes
        return plan


def _until_dead(messages: list[StoredMessage], attempt: int, maximum: int) -> list[StoredMessage]:
    """The leading ``messages`` (delivered under a lease of ``attempt``) that have had
    fewer than ``maximum`` deliveries: one that reached it is a dead letter, never
    redelivered in place."""
    for position, message in enumerate(messages):
        if deliveries(message, attempt) >= maximum:
            return messages[:position]
    return messages
