"""An expired lease goes to the retry topic: a receive hands every queue with a lease past
its deadline to :meth:`LeaseExpiry.expire` before it plans new deliveries.

The lease's unsettled messages are re-published to the next backoff level of
``retry.<group>.<topic>`` (one append per lease and level), or to ``dlq.<group>`` after the
group's last attempt (or to the group's dead-letter destination, a user topic, if it has
one: see retry_topic.py), then settled in the lease, so the queue's committed offset moves
on. On a FIFO topic (order), and for a group whose redelivery is immediate (SQS's
visibility timeout), they stay in place: the receive redelivers the lease itself, unless the
last attempt failed: then they go to the DLQ. A group whose redelivery is immediate moves
them on after all while flow control holds its queue (``flow_bound``: so many offsets behind
the oldest unsettled one, or so many open leases, that no new message would be handed out):
to the first backoff level, whatever their attempt, so a message never settled cannot hold
back the ones behind it.

Fence: a move settles what it forwards in the lease (``gone``: an ack of it is stale) in the
append's own transaction, conditional on the lease's id and version as read
(``settle_requests``); a lease it deletes leaves a moved mark naming what it forwarded.
So the move and the settle commit together or not at all, and whatever changed the lease in
between (an ack, a change_invisible splitting a message off, a nack, another container's
expiry) makes the move store nothing and read the lease again: no message is forwarded
twice, and an ack that answered ``acked`` is never followed by a move of that message.

Idempotency: the expiry's append is stamped ``~expire.<group>.<topic>#<queue>.<lease id>``
with 17 as sequence when the lease's messages all go to one target, else the target (level
0-15, 16 = DLQ); a lease id is unique per delivery, so the records tell an ack's slow path
which messages an expiry moved (``moved_offsets``). Its digest (and so its object's name)
names the offsets moved: a re-run moving fewer (an ack landed after a failed attempt)
writes an object of its own. A re-run of a committed move finds it AlreadyRecorded, and the
lease changed by that commit.

Expiry stays one append per lease (and target), not per pass: its stamp must come out the
same in a re-run after a crash, and only the lease id does — which leases a pass finds
expired changes between the crash and the re-run (acks, invisible-time changes, other
consumers' passes), so a per-pass stamp could not be deduplicated.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from ... import limits
from ...model import MessageType, ProducerStamp, StoredMessage, Topic
from ...rules.group_state import GroupQueueState, Lease
from ...rules.retries import DLQ_TARGET, Target, dlq_topic, retry_origin, retry_topic, target_for
from ...storage.appends import ExtraItemRejected
from ...storage.groups import GroupStateStore
from ...storage.log_index import LogIndex
from ...storage.move_records import MoveRecords
from .. import optimistic
from ..batch_reader import BatchReader
from ..delivery.queue_plan import flow_bound
from ..moves import is_move_batch
from ..offset_lookup import OffsetLookup
from ..trace import record_expired
from .retry_topic import RetryTopic
from .settings import RetrySettings

MAX_MOVES_PER_PASS = 40
"""Expired leases one receive moves per queue (each is an append, carrying its settles in
its transaction): the rest wait for the next pass."""
SINGLE_TARGET_SEQUENCE = DLQ_TARGET + 1
"""The sequence of an expired lease's move when all its messages go to one target (retry
level or DLQ): a re-run whose target changed (a new max_delivery_attempts) finds it
AlreadyRecorded. Leases split over several targets keep one sequence per target number (a
changed split may then store a message twice; never lose one)."""
REDELIVERED_SEQUENCE = SINGLE_TARGET_SEQUENCE + 1
"""The sequence of the trace an in-place redelivery leaves of the lease id it superseded
(which offsets it held unsettled): no move, nothing appended."""


class LeaseExpiry:
    def __init__(
        self,
        *,
        retry_topic: RetryTopic,
        settings: RetrySettings,
        index: LogIndex,
        reader: BatchReader,
        lookup: OffsetLookup,
        states: GroupStateStore,
        records: MoveRecords,
        clock: Callable[[], int],
    ) -> None:
        self._retry_topic = retry_topic
        self._settings = settings
        self._index = index
        self._reader = reader
        self._lookup = lookup
        self._states = states
        self._records = records
        self._clock = clock

    def expire(
        self,
        state: GroupQueueState,
        topic: Topic,
        now: int,
        until: float | None = None,
        budget: int | None = None,
    ) -> GroupQueueState | None:
        """Move the messages of expired leases on (see the module doc); the state as saved,
        or None if the queue must wait for the next pass: every attempt lost a race, or
        ``until`` (``time.monotonic()``) passed with expired leases left. Its state then
        still holds expired leases, and redelivering them in place would make their next
        expiry move them again under another stamp.

        A group whose redelivery is immediate keeps its expired leases in place (only dead
        letters move on) and the receive redelivers them: ``budget`` (the messages it may
        hand out) bounds the expired leases looked at, oldest first, as those are the ones
        it redelivers."""
        if not state.may_have_expired(now):
            return state

        def move_expired(_: int) -> GroupQueueState | None | optimistic.Conflict:
            nonlocal state
            if not state.complete:
                self._states.load_leases(state)
            state.refresh()
            expired = state.expired_leases(now)[:MAX_MOVES_PER_PASS]
            if not expired:
                return state
            maximum = self._settings.max_delivery_attempts(state.group)
            fifo = topic.message_type is MessageType.FIFO
            in_place = fifo or self._settings.redelivers_at_once(state.group)
            soonest = in_place and not fifo and flow_bound(state)
            if soonest:
                in_place = False  # in place, they would hold new messages back: move them
            elif in_place and not fifo and budget is not None:
                expired = _oldest_covering(expired, budget)
            raced = out_of_time = False
            for lease in expired:
                if until is not None and time.monotonic() > until:
                    out_of_time = True
                    break
                if not self._expire_lease(state, topic, lease, maximum, in_place, now, soonest):
                    raced = True
                    break
            if not raced:
                state.refresh()
                if not state.changed() or self._states.save(state):
                    return None if out_of_time else state
            state = self._states.load_one(state.group, state.topic, state.queue)
            return optimistic.CONFLICT

        return optimistic.update(move_expired, exhausted=lambda: None)  # contended: next pass

    def _expire_lease(
        self,
        state: GroupQueueState,
        topic: Topic,
        lease: Lease,
        maximum: int,
        in_place: bool,
        now: int,
        soonest: bool = False,
    ) -> bool:
        """Move one expired lease's messages on, each append carrying the settle of what it
        moves, conditional on the lease as read; False if the lease changed meanwhile.
        ``in_place``: only dead letters move, the rest stay to be redelivered in place.
        ``soonest``: retries go to the first backoff level, whatever their attempt."""
        found = self._lookup.messages_at(
            state.topic, state.queue, lease.unsettled(), now_s=now // 1000
        )
        by_target: dict[Target, list[StoredMessage]] = {}
        for message in found.messages.values():
            target = target_for(message, lease.attempt, maximum, nacked=False)
            if soonest and not target.dead:
                target = Target(0)
            if in_place and not target.dead:
                continue  # redelivered in place (FIFO: in order)
            by_target.setdefault(target, []).append(message)
        producer = expire_producer(state.group, state.topic, state.queue, lease.lease_id)
        single = len(by_target) == 1  # the usual case: one sequence whatever the target, so
        # a re-run after max_delivery_attempts changed (cached 30 s) still deduplicates
        moves = sorted(by_target.items(), key=lambda kv: kv[0].number)
        current = lease
        for position, (target, messages) in enumerate(moves):
            expired = found.expired if position == len(moves) - 1 else []
            offsets = [m.offset for m in messages]
            after = current.moved_on(offsets, expired)
            # the digest names what is moved: a re-run moving fewer (an ack landed between)
            # writes an object of its own, never reuses one holding more
            digest = hashlib.sha256(f"{producer}#{target.number}#{offsets}".encode()).hexdigest()
            sequence = SINGLE_TARGET_SEQUENCE if single else None
            fence = self._states.settle_requests(state, current, after)
            try:
                recorded = self._retry_topic.move(
                    state.group, topic, target, messages, lease.attempt, producer,
                    sequence=sequence, digest=digest, fence=fence,
                )  # fmt: skip
                if recorded is not None and recorded != digest:
                    # the stamp holds another set, moved and settled before (a FIFO lease
                    # moved in part twice): these are others, moved under the lease version
                    recorded = self._retry_topic.move(
                        state.group, topic, target, messages, lease.attempt,
                        f"{producer}.v{current.version}", sequence=sequence, digest=digest,
                        fence=fence,
                    )  # fmt: skip
            except ExtraItemRejected:
                return False
            if recorded is not None and not self._states.settle(state, current, after):
                return False  # moved before by another receive, which settled it
            state.after_move(after)
            current = after
        if not moves and found.expired:
            after = current.moved_on([], found.expired)
            if not self._states.settle(state, current, after):
                return False
            state.after_move(after)
        record_expired(
            self._retry_topic.topics,
            state.group,
            topic,
            list(found.messages.values()),
            lease.attempt,
        )
        return True

    def moved_offsets(
        self, group: str, topic: str, queue: int, lease_id: str, offsets: list[int]
    ) -> set[int]:
        """Which of ``offsets`` (delivered under ``lease_id``) were moved on when the lease
        expired or by a nack, or redelivered in place since (an ack of such a handle is
        stale, not an ack: the message comes back; one acked before the move was not
        moved: its re-ack is acked): the lease's moved mark, and its expiry's records.
        Asked only on an ack's slow path. The records and each moved batch are read once
        for all of them; a message past retention, or whose moved batch cannot be read,
        counts as moved."""
        if not offsets:
            return set()
        marks = self._states.marks_to_read(group, topic, queue, [lease_id])
        records, found = self._records.records_with(
            _expiry_stamps(group, topic, queue, lease_id), [marks]
        )
        marked = self._states.parse_marks(topic, queue, [lease_id], found).get(lease_id, ())
        superseded = records.pop(
            ProducerStamp(expire_producer(group, topic, queue, lease_id), REDELIVERED_SEQUENCE),
            None,
        )
        redelivered = {o for o in offsets if superseded is not None and o in superseded.offsets}
        if not records:
            return (set(offsets) & set(marked)) | redelivered
        originals = self._lookup.messages_at(
            topic, queue, sorted(set(offsets)), now_s=self._clock() // 1000
        ).messages
        moved = set(offsets) & set(marked)
        moved |= {o for o in offsets if o not in originals}  # past retention: cannot tell
        wanted = {originals[o].message_id: o for o in offsets if o in originals}
        origin = retry_origin(group, topic) or topic
        elsewhere = self._retry_topic.dead_letter_topic(group)
        dead = [dlq_topic(group)] + ([elsewhere[0].name] if elsewhere is not None else [])
        for stamp, record in records.items():
            names = [retry_topic(group, origin), *dead]
            if stamp.sequence == DLQ_TARGET:
                names = names[1:]
            elif stamp.sequence < DLQ_TARGET:
                names = names[:1]
            for q, base in record.bases.items():
                batch: list[StoredMessage] | None = None
                for name in names:
                    # a single-target move went to the retry topic or the DLQ, whose
                    # offsets overlap: only the move's own batch (its object's name) counts
                    entry = self._index.entry_at(name, q, base)
                    if (
                        entry is not None
                        and entry.base_offset == base
                        and is_move_batch(entry.object_key, stamp, record.digest)
                    ):
                        batch = self._reader.messages(entry)
                        break
                if not batch:
                    return set(offsets)  # unreadable: count them all as moved
                moved.update(wanted[m.message_id] for m in batch if m.message_id in wanted)
        return moved | redelivered

    def redelivery_traces(
        self, group: str, topic: str, queue: int, superseded: dict[str, list[int]]
    ) -> list[dict]:
        """Transaction items, to commit with the save of an in-place redelivery, that
        record the unsettled offsets of each superseded lease id: a late ack of such a
        handle answers ``expired`` (:meth:`moved_offsets`) even once the redelivery
        settled. Kept as long as a move's record."""
        expires_at = self._clock() // 1000 + limits.IDEMPOTENCY_WINDOW_SECONDS
        return [
            self._records.trace_request(
                ProducerStamp(expire_producer(group, topic, queue, lease_id), REDELIVERED_SEQUENCE),
                offsets,
                expires_at=expires_at,
            )
            for lease_id, offsets in superseded.items()
            if offsets
        ]


def _oldest_covering(expired: list[Lease], budget: int) -> list[Lease]:
    """The oldest of ``expired`` that hold ``budget`` unsettled messages between them."""
    taken: list[Lease] = []
    held = 0
    for lease in expired:
        if held >= budget:
            break
        taken.append(lease)
        held += len(lease.unsettled())
    return taken


def _expiry_stamps(group: str, topic: str, queue: int, lease_id: str) -> list[ProducerStamp]:
    producer = expire_producer(group, topic, queue, lease_id)
    return [ProducerStamp(producer, n) for n in range(REDELIVERED_SEQUENCE + 1)]


def expire_producer(group: str, topic: str, queue: int, lease_id: str) -> str:
    """The producer id of the moves of an expired lease (lease ids are unique per delivery)."""
    return f"~expire.{group}.{topic}#{queue}.{lease_id}"
