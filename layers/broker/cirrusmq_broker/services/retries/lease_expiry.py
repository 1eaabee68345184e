"""Consumer retries: expired leases and nacks go to the group's retry topic (or its DLQ).

Three hooks of a receive / ack-like call, all without timers or a scheduler:

- ``expire`` (receive, per queue with a lease past its deadline): the lease's unsettled
  messages are re-published to the next backoff level of ``retry.<group>.<topic>`` (one
  append per lease and level), or to ``dlq.<group>`` after the group's last attempt, then
  settled in the lease, so the queue's committed offset moves on. On a FIFO topic they stay
  in place (order) unless the last attempt failed: then they go to the DLQ.
- ``serve`` (receive): the retry topic's queues are served as part of a receive of the user
  topic; a level queue is read only up to the first batch not yet visible.
- ``nack``: the consumer gives messages back now, optionally asking for a delay.

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
lease changed by that commit. A nack names its (lease, offset) pairs in the digest.

Expiry stays one append per lease (and target), not per pass: its stamp must come out the
same in a re-run after a crash, and only the lease id does — which leases a pass finds
expired changes between the crash and the re-run (acks, invisible-time changes, other
consumers' passes), so a per-pass stamp could not be deduplicated.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from cachetools import TTLCache

from ..errors import (
    AccessDenied,
    ForeignReceiptHandle,
    InvalidDuration,
    InvalidRequest,
    ReceiptHandleExpired,
    TopicNotFound,
)
from ..model import MessageType, NewMessage, ProducerStamp, ReceivedMessage, StoredMessage, Topic
from ..rules.filters import TagFilter
from ..rules.group_state import GroupQueueState, Lease
from ..rules.receipts import InvalidReceiptHandle, ReceiptHandle, ReceiptSigner
from ..rules.retries import (
    DEFAULT_MAX_DELIVERY_ATTEMPTS,
    DLQ_QUEUES,
    DLQ_RETENTION_HOURS,
    DLQ_TARGET,
    MAX_MAX_DELIVERY_ATTEMPTS,
    MAX_NACK_DELAY_SECONDS,
    MIN_MAX_DELIVERY_ATTEMPTS,
    MIN_RETRY_RETENTION_HOURS,
    RETRY_QUEUES,
    Target,
    as_original,
    dlq_topic,
    is_internal,
    moved_copy,
    retry_origin,
    retry_topic,
    target_for,
    visible_at,
)
from ..storage.appends import ExtraItemRejected
from ..storage.group_configs import GroupConfigStore
from ..storage.group_states import GroupStateStore
from ..storage.group_views import GroupView, GroupViewReader
from ..storage.log_index import LogIndex
from ..storage.move_records import MoveRecords
from ..validation import check_group_name
from .batch_reader import BatchReader
from .moves import MoveAppender, is_move_batch
from .offset_lookup import OffsetLookup
from .topic_catalog import TopicCatalog

RETRY_CHECK_SECONDS = 5
"""An idle consumer reads its retry topic's queues at most this often per container."""
CONFIG_CACHE_SECONDS = 30
MAX_MOVES_PER_PASS = 40
"""Expired leases one receive moves per queue (each is an append; the settles are items of
the queue's write transaction, which takes 100). As many as a receive would redeliver in
place (consume.MAX_LEASES_PER_PASS), so none of them is: the rest wait for the next pass."""
SAVE_ATTEMPTS = 6
SINGLE_TARGET_SEQUENCE = DLQ_TARGET + 1
"""The sequence of an expired lease's move when all its messages go to one target (retry
level or DLQ): a re-run whose target changed (a new max_delivery_attempts) finds it
AlreadyRecorded. Leases split over several targets keep one sequence per target number (a
changed split may then store a message twice; never lose one)."""
REDELIVERED_SEQUENCE = SINGLE_TARGET_SEQUENCE + 1
"""The sequence of the trace an in-place redelivery leaves of the lease id it superseded
(which offsets it held unsettled): no move, nothing appended."""
MAX_LEASES_PER_MOVE = 45
"""Leases one nack append settles in its transaction (DynamoDB takes 100 items; the append
itself takes three, each lease one or two: its settle, and its moved mark if deleted)."""
NACK_MARGIN_SECONDS = 3
"""A nack of a lease this close to its deadline (or past it) answers ``expired``: the
lease's expiry is about to move its messages on (both moves are fenced on the lease, so only
one of them would; this margin only spares the nack a lost race)."""

ServeOnce = Callable[[GroupView, Topic, TagFilter, int, int, float], list[ReceivedMessage]]


class RetryService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        moves: MoveAppender,
        index: LogIndex,
        reader: BatchReader,
        states: GroupStateStore,
        views: GroupViewReader,
        configs: GroupConfigStore,
        records: MoveRecords,
        signer: Callable[[], ReceiptSigner],
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._moves = moves
        self._index = index
        self._reader = reader
        self._states = states
        self._views = views
        self._configs = configs
        self._records = records
        self._make_signer = signer
        self._clock = clock
        self._lookup = OffsetLookup(index, reader)
        self._max: TTLCache[str, int] = TTLCache(maxsize=4096, ttl=CONFIG_CACHE_SECONDS)
        self._next_check: dict[tuple[str, str], int] = {}
        """(group, topic) → when (ms) its retry topic is worth reading again."""
        self._visible: dict[str, tuple[int, int]] = {}
        """Retry stream → (offset X, T): the batch at X becomes visible at T (immutable)."""
        self._lock = threading.Lock()

    def _signer(self) -> ReceiptSigner:
        """Built on first use: a process that never reads handles needs no secret."""
        signer = getattr(self, "_built_signer", None)
        if signer is None:
            signer = self._built_signer = self._make_signer()
        return signer

    # ================================================================ settings
    def max_delivery_attempts(self, group: str, *, fresh: bool = False) -> int:
        with self._lock:
            cached = None if fresh else self._max.get(group)
        if cached is not None:
            return cached
        value = self._configs.max_delivery_attempts(group) or DEFAULT_MAX_DELIVERY_ATTEMPTS
        with self._lock:
            self._max[group] = value
        return value

    def set_max_delivery_attempts(self, group: str, value: int) -> int:
        check_group_name(group)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest("max_delivery_attempts must be an integer")
        if not MIN_MAX_DELIVERY_ATTEMPTS <= value <= MAX_MAX_DELIVERY_ATTEMPTS:
            raise InvalidRequest(
                f"max_delivery_attempts must be {MIN_MAX_DELIVERY_ATTEMPTS}-"
                f"{MAX_MAX_DELIVERY_ATTEMPTS}"
            )
        self._configs.set_max_delivery_attempts(group, value)
        with self._lock:
            self._max[group] = value
        return value

    # ================================================================ expiry
    def expire(
        self,
        state: GroupQueueState,
        topic: Topic,
        now: int,
        until: float | None = None,
    ) -> GroupQueueState | None:
        """Move the messages of expired leases on (see the module doc); the state as saved,
        or None if the queue must wait for the next pass: every attempt lost a race, or
        ``until`` (``time.monotonic()``) passed with expired leases left. Its state then
        still holds expired leases, and redelivering them in place would make their next
        expiry move them again under another stamp."""
        if not state.may_have_expired(now):
            return state
        for _ in range(SAVE_ATTEMPTS):
            if not state.complete:
                self._states.load_leases(state)
            state.refresh()
            expired = state.expired_leases(now)[:MAX_MOVES_PER_PASS]
            if not expired:
                return state
            maximum = self.max_delivery_attempts(state.group)
            fifo = topic.message_type is MessageType.FIFO
            raced = out_of_time = False
            for lease in expired:
                if until is not None and time.monotonic() > until:
                    out_of_time = True
                    break
                if not self._expire_lease(state, topic, lease, maximum, fifo, now):
                    raced = True
                    break
            if not raced:
                state.refresh()
                if not state.changed() or self._states.save(state):
                    return None if out_of_time else state
            state = self._states.load_one(state.group, state.topic, state.queue)
        return None  # contended: the queue waits for the next pass

    def _expire_lease(
        self,
        state: GroupQueueState,
        topic: Topic,
        lease: Lease,
        maximum: int,
        fifo: bool,
        now: int,
    ) -> bool:
        """Move one expired lease's messages on, each append carrying the settle of what it
        moves, conditional on the lease as read; False if the lease changed meanwhile."""
        found = self._lookup.messages_at(
            state.topic, state.queue, lease.unsettled(), now_s=now // 1000
        )
        by_target: dict[Target, list[StoredMessage]] = {}
        for message in found.messages.values():
            target = target_for(message, lease.attempt, maximum, nacked=False)
            if fifo and not target.dead:
                continue  # FIFO: redelivered in place, in order
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
                recorded = self._move(
                    state.group, topic, target, messages, lease.attempt, producer,
                    sequence=sequence, digest=digest, fence=fence,
                )  # fmt: skip
                if recorded is not None and recorded != digest:
                    # the stamp holds another set, moved and settled before (a FIFO lease
                    # moved in part twice): these are others, moved under the lease version
                    recorded = self._move(
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
        return True

    def moved_offsets(
        self, group: str, topic: str, queue: int, lease_id: str, offsets: list[int]
    ) -> set[int]:
        """Which of ``offsets`` (delivered under ``lease_id``) were moved on when the lease
        expired or by a nack (an ack of such a handle is stale, not an ack: the message
        comes back from the retry topic; one acked before the move was not moved: its
        re-ack is acked): the lease's moved mark, and its expiry's records.
        Asked only on an ack's slow path. The records and
        each moved batch are read once for all of them; a message past retention, or whose
        moved batch cannot be read, counts as moved."""
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
        for stamp, record in records.items():
            names = [retry_topic(group, origin), dlq_topic(group)]
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
        from .. import limits

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

    def _move(
        self,
        group: str,
        topic: Topic,
        target: Target,
        messages: list[StoredMessage],
        attempt: int | list[int],
        producer: str,
        *,
        sequence: int | None = None,
        digest: str | None = None,
        fence: list[dict] | None = None,
    ) -> str | None:
        destination, queue = self._destination(group, topic, target)
        attempts = attempt if isinstance(attempt, list) else [attempt] * len(messages)
        copies: list[NewMessage] = [
            moved_copy(m, a, target) for m, a in zip(messages, attempts, strict=True)
        ]
        stamp = ProducerStamp(producer, target.number if sequence is None else sequence)
        recorded = self._moves.append(destination, queue, copies, stamp, digest, fence=fence)
        if not target.dead:  # this container looks at the retry topic when it is due
            key = (group, retry_origin(group, topic.name) or topic.name)
            due = visible_at(self._clock(), target.number)
            with self._lock:
                self._next_check[key] = min(self._next_check.get(key, due), due)
        return recorded

    def _destination(self, group: str, topic: Topic, target: Target) -> tuple[Topic, int]:
        if target.dead:
            return self._moves.ensure(dlq_topic(group), DLQ_QUEUES, DLQ_RETENTION_HOURS), 0
        origin = retry_origin(group, topic.name) or topic.name
        retention = max(topic.retention_hours, MIN_RETRY_RETENTION_HOURS)
        return self._moves.ensure(retry_topic(group, origin), RETRY_QUEUES, retention), (
            target.number
        )

    # ================================================================ serving
    def serve(
        self,
        group: str,
        topic: Topic,
        tag_filter: TagFilter,
        budget: int,
        invisible_s: int,
        give_up: float,
        serve_once: ServeOnce,
    ) -> list[ReceivedMessage]:
        """Deliver due retry messages of ``topic`` to ``group`` (as their originals)."""
        key = (group, topic.name)
        now = self._clock()
        with self._lock:
            if now < self._next_check.get(key, 0):
                return []
        retry = self._moves.existing(retry_topic(group, topic.name))
        if retry is None:
            self._later(key, now + RETRY_CHECK_SECONDS * 1000)
            return []
        view = self._views.read(group, retry.name, retry.queues)
        next_due = now + RETRY_CHECK_SECONDS * 1000
        for q, head in list(view.heads.items()):
            state = view.states[q]
            end, due = self._visible_end(retry, q, state, head.next_offset, now)
            view.heads[q] = replace(head, next_offset=end)
            if due is not None:
                next_due = min(next_due, due)
            if state.earliest_deadline is not None:
                next_due = min(next_due, state.earliest_deadline)
        received = serve_once(view, retry, tag_filter, budget, invisible_s, give_up)
        for r in received:  # their leases may expire: look again then
            next_due = min(next_due, r.invisible_until)
        self._later(key, 0 if len(received) >= budget else next_due)
        return [self.present(r) for r in received]

    def _later(self, key: tuple[str, str], when: int) -> None:
        with self._lock:
            if len(self._next_check) > 10_000:
                self._next_check.clear()
            self._next_check[key] = when

    def _visible_end(
        self, retry: Topic, queue: int, state: GroupQueueState, head: int, now: int
    ) -> tuple[int, int | None]:
        """(offset before which the level queue is visible now, when the next batch is due)."""
        if head <= state.cursor:
            return head, None
        stream = f"{retry.name}#{queue}"
        with self._lock:
            cached = self._visible.get(stream)
        if cached is not None and cached[0] >= state.cursor and now < cached[1]:
            return cached[0], cached[1]  # the index is immutable: no need to read it again
        page = self._index.read_from(
            retry.name, queue, state.cursor_base, 100, now_s=now // 1000, end=head
        )
        end = max(page.floor, state.cursor)
        for entry in page.entries:
            due = visible_at(entry.stored_timestamp, queue)
            if due > now:
                with self._lock:
                    if len(self._visible) > 10_000:
                        self._visible.clear()
                    self._visible[stream] = (entry.base_offset, due)
                return max(entry.base_offset, state.cursor), due
            end = entry.next_offset
        return min(max(end, state.cursor), head), None

    @staticmethod
    def present(received: ReceivedMessage) -> ReceivedMessage:
        """A retry delivery as the consumer sees it: original place, attempts so far."""
        message = received.message
        return replace(
            received,
            message=as_original(message),
            delivery_attempt=message.system.reconsume_count + received.delivery_attempt,
        )

    # ================================================================ nack
    def nack(
        self,
        group: str,
        receipt_handles: list[str],
        delay_seconds: int | None = None,
        may_consume: Callable[[str], bool] | None = None,
    ) -> list[tuple[str, str, Exception | None]]:
        """Give messages back: each goes to the retry topic at the next backoff level, or at
        the smallest level of at least ``delay_seconds``, or to the DLQ after the last
        attempt; then it is settled. One (handle, status, error) per handle, in order;
        status is ``acked`` (given back: the receipt handle is done), ``expired`` or
        ``invalid`` like an ack's.

        Idempotency: per queue and target one append (whatever the number of leases)
        stamped with the lease id and offset of its first message, its digest naming every
        (lease, offset); a resend of the same nack is AlreadyRecorded and only settles. A
        resend naming other offsets (after a crash between append and settle) moves each
        message on its own instead (a message may then be delivered once more; none is
        lost). A lease within ``NACK_MARGIN_SECONDS`` of its deadline answers ``expired``.
        """
        from .. import limits

        check_group_name(group)
        if not 1 <= len(receipt_handles) <= limits.MAX_ACK_HANDLES:
            raise InvalidRequest(f"nack takes 1-{limits.MAX_ACK_HANDLES} receipt handles")
        if delay_seconds is not None and (
            isinstance(delay_seconds, bool) or not 0 <= delay_seconds <= MAX_NACK_DELAY_SECONDS
        ):
            raise InvalidDuration(f"delay_seconds must be 0-{MAX_NACK_DELAY_SECONDS}")
        outcomes: dict[int, tuple[str, str, Exception | None]] = {}
        by_lease: dict[tuple[str, int, str], dict[int, ReceiptHandle]] = {}
        for position, text in enumerate(receipt_handles):
            try:
                handle = self._signer().decode(text)
                if handle.group != group:
                    raise ForeignReceiptHandle(
                        "the receipt handle belongs to another consumer group"
                    )
            except (InvalidReceiptHandle, ForeignReceiptHandle) as exc:
                outcomes[position] = (text, "invalid", exc)
                continue
            if may_consume is not None and not may_consume(handle.topic):
                denied = AccessDenied(
                    f"access denied: this access key may not consume topic {handle.topic} "
                    f"as group {group}"
                )
                outcomes[position] = (text, "invalid", denied)
                continue
            by_lease.setdefault((handle.topic, handle.queue, handle.lease_id), {})[position] = (
                handle
            )
        by_queue: dict[tuple[str, int], dict[str, dict[int, ReceiptHandle]]] = {}
        for (topic_name, queue, lease_id), handles in by_lease.items():
            by_queue.setdefault((topic_name, queue), {})[lease_id] = handles
        for (topic_name, queue), leases in by_queue.items():
            try:
                topic = self._topic(topic_name)
            except TopicNotFound as exc:
                for handles in leases.values():
                    for p in handles:
                        outcomes[p] = (receipt_handles[p], "invalid", exc)
                continue
            done = self._nack_queue(group, topic, queue, leases, delay_seconds)
            for p, status in done.items():
                error = (
                    ReceiptHandleExpired(
                        "the receipt handle is stale: the message was acked or redelivered since"
                    )
                    if status == "expired"
                    else None
                )
                outcomes[p] = (receipt_handles[p], status, error)
        return [outcomes[p] for p in range(len(receipt_handles))]

    def resolve_topic(self, name: str) -> Topic:
        """A topic named by a receipt handle, internal names (retry, DLQ) included."""
        return self._topic(name)

    def _topic(self, name: str) -> Topic:
        if is_internal(name):
            topic = self._moves.existing(name)
            if topic is None:
                raise TopicNotFound(f"topic {name!r} does not exist")
            return topic
        return self._topics.active(name)

    def _nack_queue(
        self,
        group: str,
        topic: Topic,
        queue: int,
        leases: dict[str, dict[int, ReceiptHandle]],
        delay_seconds: int | None,
    ) -> dict[int, str]:
        """Nack the handles of one queue: one append per target for all its leases (the
        digest names each lease's offsets), carrying the settle of each lease conditional
        on the lease as read; a lease changed meanwhile makes the nack read them again."""
        statuses = {p: "expired" for handles in leases.values() for p in handles}
        given_back: set[tuple[str, int]] = set()
        for _ in range(SAVE_ATTEMPTS):
            state = self._states.load_one(group, topic.name, queue)
            margin = self._clock() + NACK_MARGIN_SECONDS * 1000
            live: dict[str, tuple[Lease, list[int]]] = {}
            for lease_id, handles in leases.items():
                lease = self._states.load_lease(state, lease_id) if state.version else None
                if lease is None:
                    continue
                for p, h in handles.items():
                    if h.offset in lease.acked or h.offset in lease.gone:
                        statuses[p] = "acked"  # settled, or given back by a nack
                if lease.deadline <= margin:
                    continue  # expiring: its expiry moves the messages
                held = sorted({h.offset for h in handles.values() if lease.holds(h.offset)})
                if held:
                    live[lease_id] = (lease, held)
            if not live or self._give_back(state, topic, live, delay_seconds, given_back):
                break
        for lease_id, handles in leases.items():
            for p, h in handles.items():
                if (lease_id, h.offset) in given_back:
                    statuses[p] = "acked"
        return statuses

    def _give_back(
        self,
        state: GroupQueueState,
        topic: Topic,
        live: dict[str, tuple[Lease, list[int]]],
        delay_seconds: int | None,
        given_back: set[tuple[str, int]],
    ) -> bool:
        """Move the ``live`` (lease, offsets) on; False if a lease changed since it was
        read (what moved before that stays moved, in ``given_back``)."""
        group, queue = state.group, state.queue
        wanted = sorted({o for _, held in live.values() for o in held})
        found = self._lookup.messages_at(topic.name, queue, wanted, now_s=self._clock() // 1000)
        maximum = self.max_delivery_attempts(group)
        fifo = topic.message_type is MessageType.FIFO
        by_target: dict[Target, list[tuple[StoredMessage, Lease]]] = {}
        in_place: dict[str, list[int]] = {}
        expired: dict[str, list[int]] = {}
        for lease_id, (lease, held) in live.items():
            for offset in held:
                message = found.messages.get(offset)
                if message is None:
                    if offset in found.expired:
                        expired.setdefault(lease_id, []).append(offset)
                    continue
                target = target_for(
                    message, lease.attempt, maximum, nacked=True, delay_seconds=delay_seconds
                )
                if fifo and not target.dead:
                    in_place.setdefault(lease_id, []).append(offset)
                else:
                    by_target.setdefault(target, []).append((message, lease))
        current = {lease_id: lease for lease_id, (lease, _) in live.items()}
        for target, pairs in sorted(by_target.items(), key=lambda kv: kv[0].number):
            pairs.sort(key=lambda pair: pair[0].offset)
            for chunk in _by_leases(pairs, MAX_LEASES_PER_MOVE):
                if not self._give_back_chunk(state, topic, target, chunk, current, expired):
                    return False
                given_back.update((lease.lease_id, m.offset) for m, lease in chunk)
        for lease_id, offsets in expired.items():  # past retention, nothing to move
            after = current[lease_id].moved_on([], offsets)
            if not self._states.settle(state, current[lease_id], after):
                return False
            current[lease_id] = after
            given_back.update((lease_id, o) for o in offsets)
        for lease_id, keep in in_place.items():
            self._suspend(state, current[lease_id], keep, delay_seconds)
            given_back.update((lease_id, o) for o in keep)
        return True

    def _give_back_chunk(
        self,
        state: GroupQueueState,
        topic: Topic,
        target: Target,
        pairs: list[tuple[StoredMessage, Lease]],
        current: dict[str, Lease],
        expired: dict[str, list[int]],
    ) -> bool:
        """One append of ``pairs`` (message, lease as first read) with the settle of each
        of their leases (as ``current`` has it) in its transaction; False if one changed."""
        group, queue = state.group, state.queue
        first_message, first_lease = pairs[0]
        producer = f"~nack.{group}.{topic.name}#{queue}.{first_lease.lease_id}"
        named = [(lease.lease_id, m.offset) for m, lease in pairs]
        digest = hashlib.sha256(f"{producer}#{target.number}#{named}".encode()).hexdigest()
        afters: dict[str, Lease] = {}
        for lease_id in dict.fromkeys(lease_id for lease_id, _ in named):
            forwarded = [o for lid, o in named if lid == lease_id]
            afters[lease_id] = current[lease_id].moved_on(forwarded, expired.pop(lease_id, []))
        fence = [
            request
            for x in afters
            for request in self._states.settle_requests(state, current[x], afters[x])
        ]
        try:
            recorded = self._move(
                group, topic, target, [m for m, _ in pairs], [x.attempt for _, x in pairs],
                producer, sequence=first_message.offset * (RETRY_QUEUES + 1) + target.number,
                digest=digest, fence=fence,
            )  # fmt: skip
        except ExtraItemRejected:
            return False
        if recorded is not None:  # this very move was made before: settle what it moved
            if recorded != digest:
                return False
            for lease_id, after in afters.items():
                if not self._states.settle(state, current[lease_id], after):
                    return False
        current.update(afters)
        return True

    def _suspend(
        self, state: GroupQueueState, lease: Lease, offsets: list[int], delay: int | None
    ) -> None:
        """FIFO: the lease ends after ``delay`` (at least 10 s): then it is delivered again
        in place, in order, with its attempt increased."""
        from .. import limits

        seconds = max(delay or 0, limits.MIN_INVISIBLE_SECONDS)
        for _ in range(SAVE_ATTEMPTS):
            state = self._states.load_one(state.group, state.topic, state.queue)
            current = self._states.load_lease(state, lease.lease_id)
            if current is None:
                return
            deadline = self._clock() + seconds * 1000
            state.leases[current.lease_id] = replace(current, deadline=deadline)
            state.touched.setdefault(current.slot, current)
            if state.earliest_deadline is None or deadline < state.earliest_deadline:
                state.earliest_deadline = deadline
            if self._states.save(state):
                return


def _by_leases(
    pairs: list[tuple[StoredMessage, Lease]], limit: int
) -> list[list[tuple[StoredMessage, Lease]]]:
    """``pairs`` in runs that name at most ``limit`` leases each (one transaction each)."""
    chunks: list[list[tuple[StoredMessage, Lease]]] = []
    leases: set[str] = set()
    for pair in pairs:
        if not chunks or (pair[1].lease_id not in leases and len(leases) >= limit):
            chunks.append([])
            leases = set()
        chunks[-1].append(pair)
        leases.add(pair[1].lease_id)
    return chunks


def _expiry_stamps(group: str, topic: str, queue: int, lease_id: str) -> list[ProducerStamp]:
    producer = expire_producer(group, topic, queue, lease_id)
    return [ProducerStamp(producer, n) for n in range(REDELIVERED_SEQUENCE + 1)]


def expire_producer(group: str, topic: str, queue: int, lease_id: str) -> str:
    """The producer id of the moves of an expired lease (lease ids are unique per delivery)."""
    return f"~expire.{group}.{topic}#{queue}.{lease_id}"
