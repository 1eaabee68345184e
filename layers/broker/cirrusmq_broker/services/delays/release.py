"""The release of delayed messages: moves due delay items' messages into their topics.

One run (the scheduler function: EventBridge fires it once a minute; a delayed send due
within the next minute wakes one too, :mod:`.wake`) first looks at its whole run: the
due-minute partitions from the checkpoint to the end of the run (no lower bound on the sort
key: moved items are deleted, so stragglers written late are still found). With nothing
due before the run ends it returns at once: at rest a release costs those few reads a
minute, not a loop. Otherwise it claims the run lease (one conditional write on the
checkpoint item: "a run loops until <its end>"), unless a run already holds one covering
what it found (it returns at once then: one loop at a time, however many sends woke a run),
and works through its run tick by tick: each tick moves what is due and sleeps until the
next whole second or the next due time seen within a second's lookahead, whichever comes
first. A run holding the lease never returns before it ends: a send due well inside it
wakes nothing (:mod:`.wake`). A run started by a wake first answers the pending ask (it
scans after it), so a later send asks again.

A move of one target queue's due items is one append through the one append path
(services/batch_writer.py): ONE object under ``topics/`` named by a digest of its bytes,
appended in a transaction that also deletes those delay items (conditional on them being
unchanged). A crash at any step leaves either nothing committed (a re-run writes the
object again, or finds the identical one, and commits once) or everything; a re-run whose
messages changed (a cancel landed in between) writes an object of its own. Overlapping
runs are harmless for the same reason: the second commit of an item is refused and
re-read: the run lease only saves loops, correctness never depends on it.

A delay object missing behind its item holds back that item alone: the chunk's other
messages are appended, and the item is dropped once its retention may have passed, or else
filed again as due then (:meth:`DelayRelease._without_object`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from cachetools import LRUCache

from ...errors import BrokerError, StorageContended, TopicNotFound
from ...model import NewMessage, StoredMessage, Topic
from ...rules.delays import MINUTE_MS, due_minute
from ...storage.appends import ExtraItemRejected, QueueClosed
from ...storage.batch_objects import BatchObjectGone
from ...storage.delays.items import DelayItem, DelayItemStore
from ...storage.delays.objects import DelayObjectStore
from ...storage.producers import ProducerRecord
from ..batch_writer import BatchWriter, WrittenBatch, content_named, encode
from ..topic_catalog import TopicCatalog
from ..trace import TraceRecorder, record_placed, request_scope, tracing
from .wake import LEASE_MARGIN_MS

log = logging.getLogger(__name__)

LOOKAHEAD_MS = 1000
"""A tick also reads items due within this much, to wake exactly at their due time."""
PREPARE_MS = 150
"""In the loop, items due within this much are prepared (their topic object written) and
committed the moment they are due: visible then, never earlier."""
MIN_TICK_MS = 200
"""Ticks are at least this far apart (bounds appends per queue and second)."""
MAX_ITEMS_PER_MOVE = 90
"""Delay item deletes per append transaction (AWS: 100 items, 2 are the append's own)."""
MAX_CATCH_UP_MINUTES = 120
"""Past minutes one tick queries at most after an outage; the next tick goes on."""
CHECKPOINT_KEEP_MS = 5 * 60_000
"""A process reuses the checkpoint it last read or wrote this long."""
MOVE_WORKERS = 8
"""Target queues moved (and due minutes queried) in parallel per tick."""


Outcome = tuple[list[DelayItem], list[DelayItem]]
"""A move's delay items: (done: moved, cancelled or dropped; left for a later tick)."""


@dataclass
class TickResult:
    moved: int = 0
    """Messages appended to their topics."""
    items: int = 0
    """Delay items done (moved, cancelled or dropped)."""
    next_due_ms: int | None = None
    """The earliest pending due time seen within the lookahead."""
    last_due_ms: int | None = None
    """The latest pending due time seen within the lookahead."""
    left: int = 0
    """Due delay items whose move failed (a later tick tries again)."""


@dataclass
class RunResult:
    ticks: int = 0
    moved: int = 0
    errors: int = 0
    lateness_ms: list[int] = field(default_factory=list)


class DelayRelease:
    """Moves due delayed messages into their topics: one :meth:`run` per invocation of
    the scheduler function, :meth:`tick` per pass over what is due."""

    def __init__(
        self,
        *,
        items: DelayItemStore,
        objects: DelayObjectStore,
        topics: TopicCatalog,
        writer: BatchWriter,
        clock: Callable[[], int],
        trace: Callable[[], TraceRecorder] | None = None,
    ) -> None:
        self._trace = trace
        """Each move (one append) is one request of message trace: one write at most."""
        self._items = items
        self._objects = objects
        self._topics = topics
        self._writer = writer
        self._clock = clock
        self._rows: LRUCache[str, list[StoredMessage]] = LRUCache(maxsize=256)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=MOVE_WORKERS, thread_name_prefix="delay-move")
        self._queries = ThreadPoolExecutor(
            max_workers=min(4, MOVE_WORKERS), thread_name_prefix="delay-query"
        )
        self._checkpoint: tuple[int, int] | None = None
        """(minute, when read): the checkpoint as this process last read or wrote it."""

    # ---------------------------------------------------------------- the loop
    def run(
        self,
        *,
        sleep_until: Callable[[int], None],
        time_left: Callable[[], float],
        woken: bool = False,
    ) -> RunResult:
        """Tick until ``time_left()`` (seconds, wall time) runs out; return after the first
        tick when nothing is due before the run would end (its lookahead spans the run) or
        when another run's lease covers what is due in it. ``woken``: a send's wake
        started this run (it answers the pending ask before it looks)."""
        result = RunResult()
        if woken:
            try:
                self._items.run_started(self._clock())
            except (BrokerError, ClientError, BotoCoreError):
                log.exception("could not answer the release wake; going on")
        lookahead_ms = int(max(time_left(), 0) * 1000) + LOOKAHEAD_MS
        while True:
            started = self._clock()
            try:
                tick = self.tick(sleep_until=sleep_until, lookahead_ms=lookahead_ms)
                result.moved += tick.moved
            except (BrokerError, ClientError, BotoCoreError):
                log.exception("a release tick failed; the next one goes on")
                result.errors += 1
                tick = TickResult(left=1)
            result.ticks += 1
            if result.ticks == 1:
                if tick.next_due_ms is None and not tick.left:
                    return result  # nothing due within this run: the next one looks again
                if not self._claim_lease(tick, time_left()):
                    return result  # a looping run moves what is due within this one
            lookahead_ms = LOOKAHEAD_MS
            now = self._clock()
            left = time_left()
            if left <= 0:
                return result
            wake = (now // 1000 + 1) * 1000
            if tick.next_due_ms is not None:
                wake = min(wake, max(tick.next_due_ms - PREPARE_MS, started + MIN_TICK_MS))
            sleep_until(min(wake, now + int(left * 1000)))

    def _claim_lease(self, tick: TickResult, left: float) -> bool:
        """Claim the run lease until this run ends; False when a looping run covers the
        due times the first tick saw (and any it failed to move)."""
        now = self._clock()
        until = now + int(max(left, 0) * 1000)
        need = until if tick.left or tick.last_due_ms is None else tick.last_due_ms
        try:
            return self._items.claim_run(until, unless_covering=need + LEASE_MARGIN_MS)
        except (BrokerError, ClientError, BotoCoreError):
            log.exception("could not claim the release run lease; looping without it")
            return True

    def tick(
        self,
        *,
        sleep_until: Callable[[int], None] | None = None,
        lookahead_ms: int = LOOKAHEAD_MS,
    ) -> TickResult:
        """Move every message due now; one append per target queue (and 90 items).

        With ``sleep_until`` (the loop), items due within ``PREPARE_MS`` are moved too: their
        objects written now, each append committed once its items are due. Items due within
        ``lookahead_ms`` are seen (``next_due_ms``), not moved.
        """
        now = self._clock()
        horizon = now + PREPARE_MS if sleep_until is not None else now
        current = due_minute(now)
        checkpoint = self._read_checkpoint(now)
        result = TickResult()
        due: list[DelayItem] = []
        pending_minutes: set[int] = set()
        if checkpoint is None or current - 1 - checkpoint > MAX_CATCH_UP_MINUTES:
            # First run, or after a long outage: one scan of the (pending-only) table for
            # the old minutes instead of a query per minute.
            due.extend(self._items.overdue_before((current - 1) * MINUTE_MS))
            old: list[int] = []
        else:
            old = list(range(checkpoint, current - 1))
        minutes = [*old, *range(current - 1, due_minute(now + lookahead_ms) + 1)]
        found = self._queries.map(lambda m: (m, self._items.due(m, now + lookahead_ms)), minutes)
        for minute, entries in found:
            for entry in entries:
                if entry.due_ms <= horizon:
                    due.append(entry)
                else:
                    pending_minutes.add(minute)
                    if result.next_due_ms is None or entry.due_ms < result.next_due_ms:
                        result.next_due_ms = entry.due_ms
                    if result.last_due_ms is None or entry.due_ms > result.last_due_ms:
                        result.last_due_ms = entry.due_ms
        failed = self._move(list({e.key: e for e in due}.values()), now, result, sleep_until)
        pending_minutes.update(int(e.slot) for e in failed)
        result.left = len(failed)
        # Minutes before the previous one take no new items any more (a send commits
        # within its 30 s timeout of choosing a due time): the checkpoint passes the
        # leading ones that are empty now.
        done_upto = current - 1
        for minute in sorted(pending_minutes):
            done_upto = min(done_upto, minute)
        if checkpoint is None or done_upto > checkpoint:
            self._items.advance_checkpoint(done_upto)
            self._checkpoint = (done_upto, now)
        return result

    def _read_checkpoint(self, now: int) -> int | None:
        """The checkpoint as this process last read or wrote it, read again after
        CHECKPOINT_KEEP_MS (only release runs move it, up: a stale one only makes a tick query
        a minute more, and a warm run at rest reads nothing but its due minutes)."""
        if self._checkpoint is None or now - self._checkpoint[1] >= CHECKPOINT_KEEP_MS:
            minute = self._items.checkpoint()
            if minute is None:
                return None
            self._checkpoint = (minute, now)
        return self._checkpoint[0]

    # ---------------------------------------------------------------- moving
    def _move(
        self,
        due: list[DelayItem],
        now: int,
        result: TickResult,
        sleep_until: Callable[[int], None] | None,
    ) -> list[DelayItem]:
        """Move due entries; returns those left for a later tick."""
        by_target: dict[tuple[str, int], list[DelayItem]] = {}
        for entry in sorted(due, key=lambda e: e.due_key):
            by_target.setdefault((entry.topic, entry.queue), []).append(entry)
        chunks = [
            (topic_name, queue, entries[start : start + MAX_ITEMS_PER_MOVE])
            for (topic_name, queue), entries in by_target.items()
            for start in range(0, len(entries), MAX_ITEMS_PER_MOVE)
        ]
        # Target queues move in parallel (each its own append); a crash anywhere is safe.
        outcomes = list(
            self._pool.map(
                lambda c: self._traced_move(c[0], c[1], c[2], now, result, sleep_until), chunks
            )
        )
        self._after_move([e for done, _ in outcomes for e in done])  # every queue's committed
        return [e for _, left in outcomes for e in left]

    def _traced_move(self, *args: Any) -> Outcome:
        """:meth:`_move_chunk` as one request of message trace (its own thread's scope)."""
        if self._trace is None:
            return self._move_chunk(*args)
        with request_scope(self._trace):
            return self._move_chunk(*args)

    def _move_chunk(
        self,
        topic_name: str,
        queue: int,
        chunk: list[DelayItem],
        now: int,
        result: TickResult,
        sleep_until: Callable[[int], None] | None = None,
    ) -> Outcome:
        """Move one target queue's chunk: one append of the messages whose delay objects
        are there; the items of a missing object are settled on their own."""
        try:
            topic = self._topics.active(topic_name)
        except TopicNotFound:
            log.info("topic %s is gone: dropping %d delay items", topic_name, len(chunk))
            return self._drop(chunk, result)
        rows = self._rows_of(chunk)
        present = [e for e in chunk if e.object_key in rows]
        done, left = self._without_object(
            topic, [e for e in chunk if e.object_key not in rows], now, result
        )
        if not present:
            return done, left
        messages = self._messages_of(present, rows)
        if not messages:  # every one was cancelled
            try:
                self._appender_free_delete(present)
            except (ClientError, StorageContended):
                return done, left + present
            with self._lock:
                result.items += len(present)
            return done + present, left
        target = queue % topic.queues
        due_at = max(e.due_ms for e in present)
        batch = self._write(topic, target, messages, max(now, due_at))
        if due_at > self._clock() and sleep_until is not None:
            sleep_until(due_at)  # prepared ahead: committed (visible) when due, not before
        try:
            bases = self._writer.append(
                [batch],
                stamp=None,
                build_record=lambda bases: ProducerRecord("", bases),
                expires_at=now // 1000 + topic.retention_hours * 3600,
                record_expires_at=0,
                extra_items=[self._items.delete_request(e) for e in present],
            )
        except ExtraItemRejected:
            # Another run moved some of them, or a cancel changed one: read them again next
            # tick. The object may be the one that other run appended: keep it (the orphan
            # sweeper deletes it if nothing indexes it).
            return done, left + present
        except QueueClosed:
            self._topics.forget(topic.name)
            dropped, kept = self._drop(present, result)
            return done + dropped, left + kept
        with self._lock:
            result.moved += len(messages)
            result.items += len(present)
        if tracing() and target in bases:
            record_placed(topic, "released", messages, target, bases[target])
        return done + present, left

    def _without_object(
        self, topic: Topic, missing: list[DelayItem], now: int, result: TickResult
    ) -> Outcome:
        """Settle items whose delay object is gone.

        An object's lifecycle tier keeps it past its items' due times plus the topic's
        retention: only from then on may an expiry have taken it, and its item is dropped.
        Before, "not found" is not taken as past retention: the item is filed again as due
        then, marked (a run drops it at that time, or moves it if the object is back), so
        it holds back no run meanwhile. Both writes are conditional on the item as read: an item
        another run moved (and deleted its object) is left alone, and gone next tick.
        """
        retention_ms = topic.retention_hours * 3_600_000

        def past_retention(entry: DelayItem) -> bool:
            return entry.object_missing or now >= entry.due_ms + retention_ms

        expired = [e for e in missing if past_retention(e)]
        done: list[DelayItem] = []
        left: list[DelayItem] = []
        if expired:
            log.warning("%d delay items past retention lost their objects: dropped", len(expired))
            done, left = self._drop(expired, result)
        for entry in missing:
            if past_retention(entry):
                continue
            log.error(
                "delay object %s is gone before its retention ended: its item waits until then",
                entry.object_key,
            )
            try:
                postponed = self._items.postpone(entry, entry.due_ms + retention_ms)
            except (ClientError, StorageContended):
                postponed = False
            if not postponed:
                left.append(entry)
        return done, left

    def _appender_free_delete(self, chunk: list[DelayItem]) -> None:
        self._items.delete(chunk)

    def _drop(self, chunk: list[DelayItem], result: TickResult) -> Outcome:
        """Delete the items (all or none): (done, left)."""
        try:
            self._items.delete(chunk)
        except (ClientError, StorageContended):
            return [], chunk
        with self._lock:
            result.items += len(chunk)
        return chunk, []

    def _rows_of(self, chunk: list[DelayItem]) -> dict[str, list[StoredMessage]]:
        """The rows of the chunk's delay objects, by key (a missing object is left out)."""
        rows: dict[str, list[StoredMessage]] = {}
        for key in dict.fromkeys(e.object_key for e in chunk):
            try:
                rows[key] = self._object_rows(key)
            except BatchObjectGone:
                continue
        return rows

    @staticmethod
    def _messages_of(
        chunk: list[DelayItem], rows: dict[str, list[StoredMessage]]
    ) -> list[NewMessage]:
        """The chunk's messages in due order, cancelled ones left out."""
        found: list[NewMessage] = []
        for entry in chunk:
            for row in rows[entry.object_key][entry.first_row : entry.first_row + entry.count]:
                if row.message_id not in entry.cancelled:
                    found.append(row.as_new())
        found.sort(key=lambda m: m.system.delivery_timestamp or 0)
        return found

    def _object_rows(self, key: str) -> list[StoredMessage]:
        with self._lock:
            cached = self._rows.get(key)
        if cached is not None:
            return cached
        from ...codec import decode_batch

        rows = decode_batch(self._objects.get(key), topic="", queue=0, base_offset=0)
        with self._lock:
            self._rows[key] = rows
        return rows

    def _write(
        self, topic: Topic, queue: int, messages: list[NewMessage], now: int
    ) -> WrittenBatch:
        """The chunk's topic object, named by a digest of its bytes."""
        batch = encode(topic, queue, messages, stored_timestamp=now)
        return self._writer.write(batch, content_named("timer-"))  # the stored objects' prefix

    def _after_move(self, moved: list[DelayItem]) -> None:
        """Delete the delay objects whose last item (the latest due) moved now, once the
        others are gone too (they were due earlier: normally moved already)."""
        done = {e.key for e in moved}
        for key in {e.object_key for e in moved if e.last}:
            entries = [e for e in moved if e.object_key == key]
            others = sorted({s for e in entries for s in e.siblings} - done)
            if not others or not self._items.remaining(others):
                self._objects.delete([key])
                with self._lock:
                    self._rows.pop(key, None)
