"""Offset rewind ("回溯消费"): move a clustering group's position on a topic.

Targets: ``earliest`` (the earliest retained offset), ``latest`` (the end of each queue),
``timestamp`` (per queue the lowest offset stored at or after it, from the index's per-batch
stored timestamps: no object is read) or ``offset`` (given queues to given offsets). Every
input is checked before anything is written (a bad one changes nothing). A target below the
retained range starts at the earliest retained offset, and the result says so per queue
(``truncated``).

Per queue the group's summary and its open leases are rewritten by
:class:`~cirrusmq_broker.storage.group_offsets.GroupOffsetWriter`: cursor = committed =
target, leases dropped (their receipt handles become stale), conditional on the summary's
version; a concurrent receive that wins makes the reset read again and retry (bounded, then
``Busy``). Re-running a reset sets the same target: it is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from ..errors import InvalidOffset, InvalidRequest
from ..storage.group_offsets import LEASES_PER_TRANSACTION, GroupOffsetWriter
from ..storage.groups import GroupStateStore
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHeads
from ..validation import check_group_name
from . import optimistic
from .log_reader import LogReader, check_queue, check_timestamp
from .topic_catalog import TopicCatalog

MAX_LEASE_CHUNKS = 64
"""Chunks of lease deletions one queue's reset may take (64 x 99 > MAX_LEASES_PER_QUEUE x 2)."""


class ResetTarget(StrEnum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"
    OFFSET = "offset"


@dataclass(frozen=True)
class QueueReset:
    """What a reset did on one queue."""

    queue: int
    offset: int
    """The group's cursor and committed offset now."""
    requested_offset: int
    """The target before clamping to the retained range (0 for ``earliest``)."""
    min_offset: int
    max_offset: int
    previous_committed: int
    previous_cursor: int
    dropped_leases: int
    truncated: bool
    """Part of what was asked for is past retention: it starts at the earliest retained."""


@dataclass(frozen=True)
class ResetResult:
    group: str
    topic: str
    target: ResetTarget
    timestamp: int | None
    queues: list[QueueReset]

    def note(self) -> str | None:
        """A sentence on the queues whose target was past retention (None if none)."""
        cut = [q for q in self.queues if q.truncated]
        if not cut:
            return None
        where = ", ".join(f"queue {q.queue} at {q.offset}" for q in cut)
        return (
            "part of the requested range is past retention: starting at the earliest retained "
            f"offset on {where}"
        )


class OffsetResetService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        heads: QueueHeads,
        states: GroupStateStore,
        writer: GroupOffsetWriter,
        log_reader: LogReader,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._index = index
        self._heads = heads
        self._states = states
        self._writer = writer
        self._log = log_reader
        self._clock = clock

    def reset(
        self,
        group: str,
        topic_name: str,
        to: str,
        *,
        timestamp_ms: int | None = None,
        offsets: Mapping[int, int] | None = None,
    ) -> ResetResult:
        """Reset ``group``'s offsets on ``topic_name`` (see the module doc)."""
        check_group_name(group)
        try:
            target = ResetTarget(to)
        except ValueError:
            allowed = ", ".join(t.value for t in ResetTarget)
            raise InvalidRequest(f"to must be one of {allowed}, not {to!r}") from None
        if (timestamp_ms is not None) != (target is ResetTarget.TIMESTAMP):
            raise InvalidRequest("timestamp goes with to=timestamp, and only with it")
        if (offsets is not None) != (target is ResetTarget.OFFSET):
            raise InvalidRequest("offsets go with to=offset, and only with it")
        if timestamp_ms is not None:
            check_timestamp(timestamp_ms)
        topic = self._topics.active(topic_name)
        if offsets is not None:
            if not offsets:
                raise InvalidRequest("offsets must name at least one queue")
            for queue, offset in offsets.items():
                check_queue(topic, queue)
                if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                    raise InvalidOffset(f"queue {queue}: offset must be an integer >= 0")
            queues = sorted(offsets)
        else:
            queues = list(range(topic.queues))
        heads = self._heads.get_many(topic.name, queues, consistent=True)  # no stale end
        now_s = self._clock() // 1000
        plans: list[tuple[int, int, int, int, bool]] = []  # queue, requested, min, max, cut
        for q in queues:
            end = heads[q].next_offset
            low = self._index.first_offset(topic.name, q, now_s=now_s, end=end)
            if target is ResetTarget.EARLIEST:
                requested = 0
            elif target is ResetTarget.LATEST:
                requested = end
            elif target is ResetTarget.OFFSET:
                assert offsets is not None
                requested = offsets[q]
                if requested > end:
                    raise InvalidOffset(
                        f"queue {q}: offset {requested} is beyond the end of the queue ({end})",
                        details={"queue": q, "max_offset": end},
                    )
            else:
                assert timestamp_ms is not None
                requested = self._log.offset_for_timestamp(topic.name, q, timestamp_ms, end=end)
            cut = requested < low
            if target is ResetTarget.TIMESTAMP and not cut and requested == low and low > 0:
                cut = self._before_retained(topic.name, q, low, now_s, timestamp_ms)
            plans.append((q, requested, low, end, cut))
        done = [self._reset_queue(group, topic.name, *plan, now_s=now_s) for plan in plans]
        return ResetResult(group, topic.name, target, timestamp_ms, done)

    def _before_retained(
        self, topic: str, queue: int, low: int, now_s: int, timestamp_ms: int
    ) -> bool:
        """Whether ``timestamp_ms`` lies before the first retained batch was stored (so part
        of what it asks for is past retention)."""
        first = self._index.entry_holding(topic, queue, low, now_s=now_s)
        return first is not None and timestamp_ms < first.stored_timestamp

    def _reset_queue(
        self,
        group: str,
        topic: str,
        queue: int,
        requested: int,
        low: int,
        end: int,
        truncated: bool,
        *,
        now_s: int,
    ) -> QueueReset:
        offset = min(max(requested, low), end)
        holder = (
            self._index.entry_holding(topic, queue, offset, now_s=now_s) if offset < end else None
        )
        cursor_base = holder.base_offset if holder is not None else offset
        dropped, chunks = 0, 0

        def rewrite(_: int) -> QueueReset | optimistic.Conflict:
            nonlocal dropped, chunks
            state = self._states.load_one(group, topic, queue)
            keys = self._writer.lease_keys(group, topic, queue, LEASES_PER_TRANSACTION + 1)
            while len(keys) > LEASES_PER_TRANSACTION and chunks < MAX_LEASE_CHUNKS:
                chunk = keys[:LEASES_PER_TRANSACTION]
                if not self._writer.drop_leases(group, topic, queue, state.version, chunk):
                    break
                dropped, chunks = dropped + len(chunk), chunks + 1
                keys = self._writer.lease_keys(group, topic, queue, LEASES_PER_TRANSACTION + 1)
            if len(keys) <= LEASES_PER_TRANSACTION and self._writer.reset(
                group,
                topic,
                queue,
                offset=offset,
                cursor_base=cursor_base,
                version=state.version,
                keys=keys,
            ):
                return QueueReset(
                    queue,
                    offset,
                    requested,
                    low,
                    end,
                    previous_committed=state.committed,
                    previous_cursor=state.cursor,
                    # and the lease stored on the summary, which the reset removed
                    dropped_leases=dropped + len(keys) + (state.inline_lease() is not None),
                    truncated=truncated,
                )
            return optimistic.CONFLICT  # a receive won: read again

        return optimistic.update(
            rewrite,
            backoff=True,
            exhausted=optimistic.busy(
                f"group {group!r} is contended on queue {queue}; retry the reset"
            ),
        )
