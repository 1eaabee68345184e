"""Janitor: purges deleted topics and sweeps orphaned batch objects.

An orphan is a batch object whose index put never happened (a produce crashed between its
object write and its index transaction, or a refused request failed to delete it).
Consumers never see it: they only read through the index. It is deleted once older than the
grace period, which exceeds the longest handler timeout, so a produce still in flight is
never swept.

The sweep is incremental and bounded. A checkpoint per queue records up to which write time
every object was examined. A run lists only that queue's ``dt=`` days from the checkpoint's
day on (one listing across the days, in key order), takes the objects written since the
checkpoint (less an overlap) and older than the grace period, and asks the index's
by-stored-time GSI which of them are indexed: one query per time window of up to
``WINDOW_OBJECTS`` objects, never the whole queue's index. A run stops after
``max_objects`` objects or when its time is up, and the next run resumes at the key it
reached.

Why this never deletes an indexed object: an index item's ``stored_timestamp`` is the
produce's ``now``, taken before its object was written (so at most a handler timeout, less
than the grace period, before the write) or, for a retry that reuses a stamped object, at
most ``REUSE_EXISTING_OBJECT_SECONDS`` after it; and it always lies in the UTC day the key's
``dt=`` names. An object missing from its window is looked up in that whole day before it is
deleted, so a clock that disagrees with S3's (the local stack's moved clock) costs reads,
never data. The GSI is eventually consistent, but only objects older than the grace period
are asked about, and their index items were written before the object was that old.
A failed call keeps every object of its batch and the checkpoint where it was.

Listing goes through the batch object store's positions (storage/batch_objects.py), never
through key order: in a general purpose bucket a pass starts at the checkpoint's ``dt=`` day
and resumes at the key it reached; a directory bucket (S3 Express One Zone) lists in no
order and takes no ``StartAfter``, so there every pass lists the queue's whole prefix in the
topic's retention tier (the key's first part; every object the topic writes is filed there)
and the write-time filter above picks the objects, and a stopped pass resumes at the start
of the page it was in; after deleting orphans before its listing is through, it lists again
from the start (a continuation token need not cover every object after it once objects are
deleted; a key to list after does). That costs one LIST call per 1,000 objects the queue
holds per pass, instead of per 1,000 objects since the checkpoint's day. An orphan left in
another tier by an earlier topic of the same name is not swept: its tier's lifecycle rule
expires it. A purge lists every tier, and there repeats its listing until a whole pass
deletes nothing, so no listing disturbed by its own deletes leaves an object behind.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from .. import clock as broker_clock
from ..model import Topic, TopicStatus
from ..storage.batch_objects import (
    REUSE_EXISTING_OBJECT_SECONDS,
    TIER_PREFIX_PATTERN,
    BatchObjectStore,
    StoredObject,
    queue_prefix,
    topic_prefix,
)
from ..storage.groups import GroupStateStore
from ..storage.janitor_checkpoints import SweepCheckpoint, SweepCheckpoints
from ..storage.large_bodies import key_topic
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHeads
from ..storage.topics import TopicStore
from .topic_catalog import TOPIC_CACHE_SECONDS

log = logging.getLogger(__name__)

KEY_PATTERN = re.compile(
    "^"
    + TIER_PREFIX_PATTERN
    + r"topics/topic=(?P<topic>[^/]+)/queue=(?P<queue>\d+)/dt=(?P<day>\d{4}-\d{2}-\d{2})/[^/]+$"
)
PURGE_DELAY_SECONDS = TOPIC_CACHE_SECONDS + 60
"""Wait this long after a delete, so no handler still appends to the topic."""
PURGE_PAGE = 1000
"""Index entries / objects deleted per step of a purge (the time budget is checked between)."""

SWEEP_MAX_OBJECTS = 200_000
"""Default bound of one sweep: objects examined (those written since the checkpoint)."""
DEFAULT_BUDGET_SECONDS = 240.0
"""Working time of a run when the caller gives no deadline (the function's timeout is 300 s)."""
OVERLAP_MS = 120_000
"""Each pass looks again at objects this much older than its checkpoint (S3/Lambda skew)."""
CLOCK_SKEW_MS = 30_000
"""Allowance for S3's clock against the producer's (and LastModified's whole seconds)."""
LIST_PAGE = 1000
"""Keys per listing call (S3's maximum)."""
DECIDE_BATCH = 5000
"""Objects collected from the listing before the index is asked about them."""
WINDOW_OBJECTS = 1000
"""Objects (sorted by write time) whose index window is read with one paginated query."""
DAY_MS = 86_400_000


@dataclass(frozen=True)
class SweepReport:
    examined: int
    """Objects written since the checkpoints and older than the grace period."""
    deleted: int
    listed: int = 0
    """Keys listed (examined or not)."""
    unfinished: int = 0
    """Queues stopped or not reached at the run's bound (the next run resumes them)."""
    failed: int = 0
    """Queues whose sweep failed (their objects kept, their checkpoint unchanged)."""


@dataclass
class _Budget:
    objects: int
    time_left: Callable[[], float]

    def out_of_time(self) -> bool:
        return self.time_left() <= 0


@dataclass
class _Tally:
    examined: int = 0
    deleted: int = 0
    listed: int = 0
    unfinished: int = 0
    failed: int = 0


class JanitorService:
    def __init__(
        self,
        *,
        topics: TopicStore,
        index: LogIndex,
        heads: QueueHeads,
        objects: BatchObjectStore,
        states: GroupStateStore,
        orphan_grace_seconds: int,
        clock: Callable[[], int],
        checkpoints: SweepCheckpoints | None = None,
        object_clock_offset: Callable[[], int] = broker_clock.offset_ms,
    ) -> None:
        """``object_clock_offset``: how far ``clock`` runs ahead of S3's LastModified (ms);
        0 on AWS, the local stack's offset there (an object's age then errs on the young side).
        """
        self._topics = topics
        self._heads = heads
        self._index = index
        self._objects = objects
        self._states = states
        self._grace_ms = orphan_grace_seconds * 1000
        self._clock = clock
        self._checkpoints = checkpoints or SweepCheckpoints.beside(heads)
        self._object_clock_offset = object_clock_offset

    # ---------------------------------------------------------------- purging
    def purge_deleted_topics(self, *, time_left: Callable[[], float] | None = None) -> list[str]:
        """Remove the data of topics deleted long enough ago; returns the names finished.

        Deletes page by page; out of time, it stops and the next run goes on (every step
        is idempotent, and the topic item goes last). A purge works on one incarnation of
        the name (its ``created_timestamp``) and never touches a topic created again: see
        :meth:`_purge`.
        """
        time_left = time_left or _time_budget(DEFAULT_BUDGET_SECONDS)
        purged = []
        now = self._clock()
        for topic in self._topics.list():
            if topic.status is not TopicStatus.DELETING:
                continue
            if now - (topic.deleted_timestamp or 0) < PURGE_DELAY_SECONDS * 1000:
                continue
            try:
                if not self._purge(topic, time_left):
                    break
            except _Superseded:
                log.info("topic %s was purged by another run meanwhile", topic.name)
                continue
            log.info("purged deleted topic %s", topic.name)
            purged.append(topic.name)
        return purged

    def _purge(self, topic: Topic, time_left: Callable[[], float]) -> bool:
        """Purge ``topic``'s incarnation; raises _Superseded once its item is gone or
        belongs to a topic created again under the name (another run finished first).

        Runs may overlap (a late or duplicate schedule delivery goes on from its own
        listing), so before every step the topic item is read again (consistent read)
        and must still be this incarnation, DELETING; the item's removal is conditional
        on the same. Within a step, a topic created again in between loses nothing: index
        entries are deleted only below the offset where the heads were closed (read while
        the item was still this incarnation, so no append came after), objects only if
        written before the delete (plus the clock allowance), and the item only if it is
        still this incarnation. A crashed produce's object written after the delete stays
        (the sweeper of a topic created again under the name removes it). Large bodies
        (``_bodies/``) stay too: a copy in another topic (a dead letter) may point at one;
        their lifecycle tier expires them.
        """
        heads = self._heads.get_many(topic.name, list(range(topic.queues)), consistent=True)
        self._still_purging(topic)  # so the heads were read before any create again
        for queue in range(topic.queues):
            closed_at, after = heads[queue].next_offset, -1
            while offsets := [
                o
                for o in self._index.base_offsets_after(topic.name, queue, after, PURGE_PAGE)
                if o < closed_at
            ]:
                self._still_purging(topic)
                self._index.delete_entries(topic.name, queue, offsets)
                after = offsets[-1]
                if time_left() <= 0:
                    return False
        written_before = (topic.deleted_timestamp or 0) + CLOCK_SKEW_MS
        # where a position survives the deletes behind it, one listing finds every object;
        # elsewhere list again until a whole listing finds nothing more to delete
        relist = not self._objects.layout.positions_survive_deletes
        deleted_in_pass = True
        while deleted_in_pass:
            deleted_in_pass, position, more = False, "", True
            while more:
                page, position, more = self._objects.list_page(
                    topic_prefix(topic.name), position=position
                )
                self._still_purging(topic)
                doomed = [
                    o.key
                    for o in page
                    if self._written_ms(o) <= written_before and key_topic(o.key) is None
                ]
                self._objects.delete(doomed)
                deleted_in_pass = relist and (deleted_in_pass or bool(doomed))
                if time_left() <= 0:
                    return False
        self._still_purging(topic)
        self._states.delete_topic_states(topic.name)
        # the (closed) heads stay: a topic created again goes on from their offsets
        self._checkpoints.delete(topic.name, topic.queues)
        if not self._topics.remove(topic.name, created_timestamp=topic.created_timestamp):
            raise _Superseded()
        return True

    def _still_purging(self, topic: Topic) -> None:
        """Raise _Superseded unless the topic item is still ``topic``'s, DELETING."""
        current = self._topics.get(topic.name, consistent=True)
        if (
            current is None
            or current.status is not TopicStatus.DELETING
            or current.created_timestamp != topic.created_timestamp
        ):
            raise _Superseded()

    # ---------------------------------------------------------------- sweeping
    def sweep_orphans(
        self,
        *,
        max_objects: int = SWEEP_MAX_OBJECTS,
        time_left: Callable[[], float] | None = None,
    ) -> SweepReport:
        """Delete batch objects older than the grace period that no index item names.

        Examines at most ``max_objects`` objects and works while ``time_left()`` (seconds)
        is positive (default: ``DEFAULT_BUDGET_SECONDS``); queues visited longest ago first.
        """
        budget = _Budget(max_objects, time_left or _time_budget(DEFAULT_BUDGET_SECONDS))
        queues = [
            (topic, queue)
            for topic in self._topics.list()
            if topic.status is TopicStatus.ACTIVE
            for queue in range(topic.queues)
        ]
        saved = self._checkpoints.get_many([(t.name, q) for t, q in queues])
        queues.sort(key=lambda tq: _visited(saved.get((tq[0].name, tq[1]))))
        tally = _Tally()
        for position, (topic, queue) in enumerate(queues):
            if budget.objects <= 0 or budget.out_of_time():
                tally.unfinished += len(queues) - position
                break
            try:
                self._sweep_queue(topic, queue, saved.get((topic.name, queue)), budget, tally)
            except Exception:  # keep what it was unsure about, go on with the other queues
                log.exception("sweeping %s queue %d failed", topic.name, queue)
                tally.failed += 1
        if tally.deleted:
            log.info("swept %d orphaned batch objects", tally.deleted)
        return SweepReport(
            tally.examined, tally.deleted, tally.listed, tally.unfinished, tally.failed
        )

    def _sweep_queue(
        self,
        topic: Topic,
        queue: int,
        saved: SweepCheckpoint | None,
        budget: _Budget,
        tally: _Tally,
    ) -> None:
        """Go on with this queue's pass, or start one; saves the checkpoint it reached."""
        fresh = saved is None or saved.incarnation != topic.created_timestamp
        point = SweepCheckpoint(topic.created_timestamp) if fresh else saved
        assert point is not None
        prefix = queue_prefix(topic.name, queue)
        since = max(point.swept_until - OVERLAP_MS, 0) if point.swept_until else 0
        if point.pass_cutoff is None:
            cutoff = self._clock() - self._grace_ms
            if cutoff <= point.swept_until:
                return
            start_after = self._listing_start(prefix, point)
        else:
            cutoff = point.pass_cutoff
            start_after = point.start_after or self._objects.day_position(prefix)
        pending: list[tuple[int, str]] = []
        examined = 0
        while True:
            page_start = start_after
            page, start_after, more = self._objects.list_page(
                prefix,
                position=page_start,
                max_keys=LIST_PAGE,
                retention_hours=topic.retention_hours,  # every object of it is in its tier
            )
            tally.listed += len(page)
            stopped = False
            for obj in page:
                written = self._written_ms(obj)
                if since < written <= cutoff and KEY_PATTERN.match(obj.key):
                    pending.append((written, obj.key))
                    budget.objects -= 1
                    if budget.objects <= 0:
                        stopped = obj.key != page[-1].key or more
                        if obj.key != page[-1].key:
                            start_after = self._objects.resume_position(page_start, obj.key)
                        break
            done = not stopped and not more
            stopping = stopped or (not done and budget.out_of_time())
            if pending and (done or stopping or len(pending) >= DECIDE_BATCH):
                removed = self._delete_orphans(topic.name, queue, pending)
                tally.deleted += removed
                examined += len(pending)
                tally.examined += len(pending)
                pending = []
                if removed and not done and not self._objects.layout.positions_survive_deletes:
                    # the deletes may have moved objects not listed yet behind the position
                    start_after = self._objects.day_position(prefix)
                if not (done or stopping):  # progress survives a crash of this run
                    self._save(
                        topic, queue, replace(point, pass_cutoff=cutoff, start_after=start_after)
                    )
            if done:
                finished = replace(point, swept_until=cutoff, pass_cutoff=None, start_after=None)
                moved = self._listing_start(prefix, finished) != self._listing_start(prefix, point)
                if fresh or examined or point.pass_cutoff is not None or moved:
                    self._save(topic, queue, finished)
                return
            if stopping:
                self._save(
                    topic, queue, replace(point, pass_cutoff=cutoff, start_after=start_after)
                )
                tally.unfinished += 1
                return

    def _delete_orphans(self, topic: str, queue: int, candidates: list[tuple[int, str]]) -> int:
        """Delete those of ``candidates`` (write time, key) that no index item names."""
        candidates.sort()
        suspects: list[str] = []
        after_ms = REUSE_EXISTING_OBJECT_SECONDS * 1000 + CLOCK_SKEW_MS
        for start in range(0, len(candidates), WINDOW_OBJECTS):
            window = candidates[start : start + WINDOW_OBJECTS]
            indexed = self._index.keys_stored_between(
                topic,
                queue,
                window[0][0] - self._grace_ms - CLOCK_SKEW_MS,
                window[-1][0] + after_ms,
            )
            suspects.extend(key for _, key in window if key not in indexed)
        by_day: dict[str, list[str]] = {}
        for key in suspects:
            match = KEY_PATTERN.match(key)
            assert match is not None
            by_day.setdefault(match["day"], []).append(key)
        orphans = []
        for day, keys in by_day.items():  # the day the key names is the index item's, exactly
            first = _day_start_ms(day)
            indexed = self._index.keys_stored_between(topic, queue, first, first + DAY_MS - 1)
            orphans.extend(key for key in keys if key not in indexed)
        self._objects.delete(orphans)
        return len(orphans)

    def _listing_start(self, prefix: str, point: SweepCheckpoint) -> str:
        """The listing position of a pass: from the ``dt=`` day of the oldest object it
        may name (where the bucket lists by key)."""
        if not point.swept_until:
            return self._objects.day_position(prefix)
        oldest = point.swept_until - OVERLAP_MS - self._grace_ms - CLOCK_SKEW_MS
        return self._objects.day_position(prefix, _day(oldest))

    def _written_ms(self, obj: StoredObject) -> int:
        """The object's write time on the janitor's clock."""
        return int(obj.last_modified.timestamp() * 1000) + self._object_clock_offset()

    def _save(self, topic: Topic, queue: int, point: SweepCheckpoint) -> None:
        self._checkpoints.put(topic.name, queue, replace(point, visited_at=self._clock()))


class _Superseded(Exception):
    """The topic item being purged is gone or belongs to a topic created again."""


def _visited(point: SweepCheckpoint | None) -> int:
    return point.visited_at if point else 0


def _day(ms: int) -> str:
    return dt.datetime.fromtimestamp(max(ms, 0) / 1000, tz=dt.UTC).strftime("%Y-%m-%d")


def _day_start_ms(day: str) -> int:
    start = dt.datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=dt.UTC)
    return int(start.timestamp() * 1000)


def _time_budget(seconds: float) -> Callable[[], float]:
    """Seconds left of a budget of ``seconds`` from now."""
    deadline = time.monotonic() + seconds
    return lambda: deadline - time.monotonic()
