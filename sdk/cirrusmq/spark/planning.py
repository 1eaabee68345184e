"""Planning a read on the driver: which queues, which offsets, which batch objects.

Offsets are not stored in the objects: a batch's rows are ``base_offset + row`` of its log
index item. So a read is planned from the index (through the broker's own
:class:`~cirrusmq_broker.storage.log_index.LogIndex`, which skips items past retention that
DynamoDB's TTL has not deleted yet) and the queue heads (each queue's next offset). The index
only ever names objects under ``topics/``: delayed (``timers/``) and transaction half
messages (``half/``) are never read, and neither are orphaned objects.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from .options import EARLIEST, LATEST, ReadOptions, StackOptions, parse_offsets

MAX_QUEUES = 64
"""The most queues a topic can have (validation): a topic not in the topics table (an
internal one, e.g. ``retry.<group>.<topic>``) has its queues found from their heads."""
INDEX_PAGE = 100
PLAN_THREADS = 8
"""Queues whose index is queried at once while planning (each query is a round trip)."""

T = TypeVar("T")


@dataclass(frozen=True)
class Slice:
    """Offsets ``[first, end)`` of one batch object (whose row 0 is ``base_offset``)."""

    queue: int
    object_key: str
    base_offset: int
    first: int
    end: int
    size_bytes: int
    count: int | None = None
    """Rows the object holds as its index item says (checked by the executor)."""


class QueueLog:
    """A topic's queues as the index and the heads describe them (driver side)."""

    def __init__(self, stack: StackOptions, topic: str, queues: int | None = None) -> None:
        from cirrusmq_broker.storage.log_index import LogIndex
        from cirrusmq_broker.storage.queue_heads import QueueHeads

        self.stack = stack
        self.topic = topic
        self._queue_count = queues
        self._dynamodb = stack.client("dynamodb")
        self.index = LogIndex(self._dynamodb, stack.log_index_table)
        self._heads = QueueHeads(self._dynamodb, stack.queue_heads_table)

    @cached_property
    def queues(self) -> list[int]:
        """The topic's queue numbers: from the topics table, else from the heads found."""
        if self._queue_count is not None:
            return list(range(self._queue_count))
        if self.stack.topics_table:
            from cirrusmq_broker.storage.topics import TopicStore

            topic = TopicStore(self._dynamodb, self.stack.topics_table).get(self.topic)
            if topic is not None:
                return list(range(topic.queues))
        heads = self._heads.get_many(self.topic, list(range(MAX_QUEUES)), consistent=True)
        return [q for q, head in heads.items() if head.next_offset > 0]

    def heads(self) -> dict[int, int]:
        """Each queue's next offset (the end of its log), read consistently in one batched
        call: a stale head would end a batch read (or an export) short of what was
        appended before it started."""
        if not self.queues:
            return {}
        found = self._heads.get_many(self.topic, self.queues, consistent=True)
        return {q: found[q].next_offset for q in self.queues}

    def earliest(self, queue: int, head: int) -> int:
        """The lowest retained offset of ``queue`` (``head`` if nothing is retained)."""
        return self.index.first_offset(self.topic, queue, now_s=self.stack.now_s(), end=head)

    def offset_at_time(self, queue: int, timestamp_ms: int, head: int) -> int:
        """The lowest offset stored at or after ``timestamp_ms`` (``head`` if none), by the
        same rule as the service's offsets-for-a-timestamp (:meth:`LogIndex.offset_at_time`:
        appends race, so the lowest offset of the batches stored just after it)."""
        return self.index.offset_at_time(self.topic, queue, timestamp_ms, end=head)

    def resolve(
        self,
        spec: str | None,
        timestamp_ms: int | None,
        heads: dict[int, int],
        *,
        default: int,
        what: str,
    ) -> dict[int, int]:
        """Per queue, the offset that ``spec`` (``earliest``/``latest``/JSON) or
        ``timestamp_ms`` names; queues the JSON leaves out get ``default``."""
        if timestamp_ms is not None:
            return _each_queue(lambda q: self.offset_at_time(q, timestamp_ms, heads[q]), heads)
        parsed = default if spec is None else parse_offsets(spec, self.topic, what=what)
        wanted = parsed if isinstance(parsed, dict) else {}
        fallback = parsed if isinstance(parsed, int) else default
        unknown = sorted(set(wanted) - set(heads))
        if unknown:
            raise ValueError(f"{what}: topic {self.topic!r} has no queue {unknown[0]}")

        def offset_of(queue: int) -> int:
            offset, head = wanted.get(queue, fallback), heads[queue]
            if offset == EARLIEST:
                offset = self.earliest(queue, head)
            elif offset == LATEST:
                offset = head
            return min(offset, head)

        return _each_queue(offset_of, heads)

    def batch_range(self, read: ReadOptions) -> tuple[dict[int, int], dict[int, int]]:
        """The (start, end) offsets per queue of a batch read (earliest..latest by default)."""
        heads = self.heads()
        start = self.resolve(
            read.starting, read.starting_timestamp, heads, default=EARLIEST, what="startingOffsets"
        )
        end = self.resolve(
            read.ending, _after(read.ending_timestamp), heads, default=LATEST, what="endingOffsets"
        )
        return start, {q: max(end[q], start[q]) for q in heads}

    def slices(self, queue: int, start: int, end: int) -> list[Slice]:
        """The retained batch objects holding offsets ``[start, end)`` of ``queue``, cut to
        that range (expired batches are left out: their offsets are gone)."""
        if start >= end:
            return []
        holding = self.index.entry_at(self.topic, queue, start)
        cursor = holding.base_offset if holding is not None else start
        found: list[Slice] = []
        now_s = self.stack.now_s()
        while cursor < end:
            page = self.index.retained_from(
                self.topic, queue, cursor, INDEX_PAGE, now_s=now_s, end=end
            )
            if not page.entries:  # nothing retained in [cursor, end)
                break
            for entry in page.entries:
                if entry.base_offset >= end:
                    return found
                first, last = max(start, entry.base_offset), min(end, entry.next_offset)
                if first < last:
                    found.append(
                        Slice(
                            queue,
                            entry.object_key,
                            entry.base_offset,
                            first,
                            last,
                            entry.size_bytes,
                            entry.count,
                        )
                    )
            cursor = page.entries[-1].next_offset
        return found

    def plan(
        self, start: dict[int, int], end: dict[int, int], read: ReadOptions
    ) -> list[list[Slice]]:
        """The slices of ``[start, end)`` of every queue, in groups (one Spark input
        partition each): packed by bytes (:func:`pack`), or, with ``objectsPerPartition``,
        at most that many objects of one queue each."""
        found = _each_queue(lambda q: self.slices(q, start[q], end.get(q, start[q])), start)
        per_object = read.objects_per_partition
        if per_object is None:
            return pack(
                [s for queue in sorted(found) for s in found[queue]],
                max_partition_bytes=read.max_partition_bytes,
                open_cost_bytes=read.open_cost_bytes,
                min_partitions=read.min_partitions or os.cpu_count() or 1,
            )
        groups: list[list[Slice]] = []
        for queue in sorted(found):
            slices = found[queue]
            for i in range(0, len(slices), per_object):
                groups.append(slices[i : i + per_object])
        return groups


def pack(
    slices: list[Slice], *, max_partition_bytes: int, open_cost_bytes: int, min_partitions: int
) -> list[list[Slice]]:
    """``slices`` in consecutive groups (one task each), as Spark splits files: an object
    weighs its bytes plus ``open_cost_bytes``; no group of several objects weighs more
    than ``max_partition_bytes``; there are at least ``min_partitions`` groups while there
    are as many objects; and of the fewest groups that allows, the heaviest is as light as
    it can be. Groups keep the order of ``slices`` and may span queues."""
    if not slices:
        return []
    weights = [max(1, s.size_bytes + open_cost_bytes) for s in slices]
    before = list(itertools.accumulate(weights, initial=0))  # weight of the objects before i
    count = min(len(slices), max(min_partitions, len(_next_fit(weights, max_partition_bytes))))
    low, high = 1, max_partition_bytes  # the lightest capacity giving at most count groups
    while low < high:
        middle = (low + high) // 2
        if len(_next_fit(weights, middle)) <= count:
            high = middle
        else:
            low = middle + 1
    bounds = _next_fit(weights, low)
    while len(bounds) < count:  # split the heaviest group of several objects in two halves
        at, (first, end) = max(
            ((i, b) for i, b in enumerate(bounds) if b[1] - b[0] > 1),
            key=lambda item: before[item[1][1]] - before[item[1][0]],
        )
        middle_weight = (before[first] + before[end]) / 2
        cut = min(end - 1, max(first + 1, bisect.bisect_left(before, middle_weight, first, end)))
        bounds[at : at + 1] = [(first, cut), (cut, end)]
    return [slices[first:end] for first, end in bounds]


def _next_fit(weights: list[int], capacity: int) -> list[tuple[int, int]]:
    """``[first, end)`` of each group when every group takes objects in order until the
    next would take it over ``capacity`` (an object heavier than that is a group alone)."""
    bounds: list[tuple[int, int]] = []
    first, load = 0, 0
    for i, weight in enumerate(weights):
        if i > first and load + weight > capacity:
            bounds.append((first, i))
            first, load = i, 0
        load += weight
    bounds.append((first, len(weights)))
    return bounds


def _each_queue(work: Callable[[int], T], queues: Iterable[int]) -> dict[int, T]:
    """``{queue: work(queue)}``, up to :data:`PLAN_THREADS` queues at once (boto3 clients
    are thread-safe; the index queries of different queues do not depend on each other)."""
    order = list(queues)
    if len(order) <= 1:
        return {q: work(q) for q in order}
    with ThreadPoolExecutor(min(PLAN_THREADS, len(order)), "cirrusmq-plan") as pool:
        return dict(zip(order, pool.map(work, order), strict=True))


def _after(timestamp_ms: int | None) -> int | None:
    """An ending timestamp is inclusive: the end is the first batch stored after it."""
    return None if timestamp_ms is None else timestamp_ms + 1


def limit_offsets(
    start: dict[int, int], latest: dict[int, int], max_offsets: int
) -> dict[int, int]:
    """End offsets taking at most ``max_offsets`` messages over all queues, shared in
    proportion to each queue's backlog (as Spark's Kafka source does), at least one from
    every queue with a backlog while the limit allows."""
    backlog = {q: max(0, latest[q] - start.get(q, latest[q])) for q in latest}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    end = {q: start.get(q, latest[q]) for q in latest}
    budget = max_offsets
    shares = {q: (b * max_offsets) // total for q, b in backlog.items()}
    for q in sorted(backlog, key=lambda q: -backlog[q]):
        take = min(backlog[q], max(shares[q], 1 if backlog[q] else 0), budget)
        end[q] += take
        budget -= take
    for q in sorted(backlog):  # what rounding left over
        take = min(latest[q] - end[q], budget)
        end[q] += take
        budget -= take
    return end
