"""Reads by offset straight from a queue's log, and the offsets of a topic's queues.

No consumer group is involved: the caller keeps its own position (the SDK's PullConsumer and
broadcast consumers keep it in SQLite). A read takes the queue's head (one consistent
GetItem), the index page from the offset on (one query; a second one only when the offset
lies inside a batch) and the batch objects (cached: they are immutable). Offsets past
retention are skipped: a read asked for below the earliest retained offset starts there and
says so (``truncated``). An idle long poll costs one GetItem per second.

Offset for a timestamp uses the index's per-batch stored timestamps (GSI ``by_stored_time``)
without reading any object. Every message of a batch has the batch's stored timestamp, so the
answer is exact per message: the lowest offset stored at or after the timestamp (batches
appended concurrently may be stored a few milliseconds out of offset order; the lowest
offset among the first batches stored at or after the time is taken).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import limits
from ..errors import InvalidOffset, InvalidRequest, InvalidTimestamp, QueueNotFound
from ..model import IndexEntry, StoredMessage, Topic
from ..rules.filters import TAG, Filter, parse_filter
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHeads
from .batch_reader import BatchReader
from .topic_catalog import TopicCatalog

MAX_READ_MESSAGES = limits.MAX_RECEIVE_MESSAGES
DEFAULT_READ_MESSAGES = 32
MAX_SCAN_MESSAGES = 2000
"""Messages one read examines (bounds the work when a filter skips most)."""
RESPONSE_BYTE_BUDGET = limits.MAX_REQUEST_BYTES - 256 * 1024
MESSAGE_OVERHEAD_BYTES = 768
POLL_INTERVAL_SECONDS = 1.0
"""A long poll re-reads the queue's head this often."""
POLL_MARGIN_SECONDS = 0.3
MAX_TIMESTAMP_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: a larger timestamp is a mistake (seconds or microseconds)."""
TIMESTAMP_SEARCH_BATCHES = 32
"""Batches stored at or after a timestamp whose lowest offset is taken."""


@dataclass(frozen=True)
class ReadResult:
    """What one read found."""

    topic: str
    queue: int
    requested_offset: int
    start_offset: int
    """Where reading started: the requested offset, or the earliest retained one above it."""
    next_offset: int
    """Where the next read goes on (past filtered-out and expired messages)."""
    max_offset: int
    """The queue's next offset (exclusive end of the log)."""
    messages: list[StoredMessage]

    @property
    def truncated(self) -> bool:
        """Offsets from the requested one up to ``start_offset`` are past retention."""
        return self.start_offset > self.requested_offset


@dataclass(frozen=True)
class QueueOffsetInfo:
    """A queue's retained range, and the offset for a timestamp when one was asked for."""

    queue: int
    min_offset: int | None
    """None when not asked for (``include_min=False``)."""
    max_offset: int
    timestamp_offset: int | None = None


def check_timestamp(timestamp_ms: int) -> int:
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
        raise InvalidTimestamp("timestamp must be an integer (milliseconds since the epoch)")
    if not 0 <= timestamp_ms <= MAX_TIMESTAMP_MS:
        raise InvalidTimestamp(
            f"timestamp {timestamp_ms} is not milliseconds since the epoch (0-{MAX_TIMESTAMP_MS})"
        )
    return timestamp_ms


def check_queue(topic: Topic, queue: int) -> int:
    if isinstance(queue, bool) or not isinstance(queue, int) or not 0 <= queue < topic.queues:
        raise QueueNotFound(
            f"topic {topic.name!r} has queues 0-{topic.queues - 1}, not {queue!r}",
            details={"topic": topic.name, "queues": topic.queues},
        )
    return queue


def _wire_size(message: StoredMessage) -> int:
    body = 4 * ((len(message.body) + 2) // 3)
    extra = sum(len(k) + len(v) for k, v in message.properties.items()) + sum(
        map(len, message.keys)
    )
    return body + extra + MESSAGE_OVERHEAD_BYTES


class LogReader:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        heads: QueueHeads,
        reader: BatchReader,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._topics = topics
        self._index = index
        self._heads = heads
        self._reader = reader
        self._clock = clock
        self._sleep = sleep

    # ================================================================ read
    def read(
        self,
        topic_name: str,
        queue: int,
        offset: int,
        *,
        max_messages: int = DEFAULT_READ_MESSAGES,
        filter_expression: str = "*",
        filter_type: str = TAG,
        wait_seconds: float = 0,
    ) -> ReadResult:
        """Up to ``max_messages`` messages from ``offset`` on, waiting up to ``wait_seconds``
        while there is nothing at or after ``offset``."""
        tag_filter = parse_filter(filter_expression, filter_type)
        if not 1 <= max_messages <= MAX_READ_MESSAGES:
            raise InvalidRequest(f"max_messages must be 1-{MAX_READ_MESSAGES}")
        if not 0 <= wait_seconds <= limits.MAX_WAIT_SECONDS:
            raise InvalidRequest(f"wait_seconds must be 0-{limits.MAX_WAIT_SECONDS}")
        if offset < 0:
            raise InvalidOffset(f"offset must be >= 0, not {offset}")
        topic = self._topics.active(topic_name)
        check_queue(topic, queue)
        give_up = time.monotonic() + wait_seconds
        while True:
            end = self._heads.get(topic.name, queue).next_offset
            if offset > end:
                raise InvalidOffset(
                    f"offset {offset} is beyond the end of queue {queue} ({end})",
                    details={"max_offset": end},
                )
            if offset < end:
                return self._read_once(topic, queue, offset, end, tag_filter, max_messages)
            remaining = give_up - time.monotonic() - POLL_MARGIN_SECONDS
            if remaining <= 0:
                return ReadResult(topic.name, queue, offset, offset, offset, end, [])
            self._sleep(min(POLL_INTERVAL_SECONDS, remaining))

    def _read_once(
        self, topic: Topic, queue: int, offset: int, end: int, tag_filter: Filter, budget: int
    ) -> ReadResult:
        now_s = self._clock() // 1000
        page = self._index.read_from(
            topic.name, queue, offset, min(100, max(budget, 8)), now_s=now_s, end=end
        )
        entries: list[IndexEntry] = list(page.entries)
        first = entries[0].base_offset if entries else page.floor
        start = max(offset, page.floor)
        if first > offset:  # the offset may lie inside a batch that starts below it
            holder = self._index.entry_holding(topic.name, queue, offset, now_s=now_s)
            if holder is not None:
                entries.insert(0, holder)
                start = offset
        messages: list[StoredMessage] = []
        position = start
        scanned, bytes_left = 0, RESPONSE_BYTE_BUDGET
        for entry in entries:
            if entry.next_offset <= position:
                continue
            batch = self._reader.messages(entry)
            if not batch:  # the object is past retention already: skip its offsets
                position = entry.next_offset
                continue
            for message in batch[max(0, position - entry.base_offset) :]:
                if len(messages) >= budget or scanned >= MAX_SCAN_MESSAGES:
                    return ReadResult(topic.name, queue, offset, start, position, end, messages)
                if tag_filter.accepts(message):
                    size = _wire_size(message)
                    if messages and size > bytes_left:
                        return ReadResult(topic.name, queue, offset, start, position, end, messages)
                    bytes_left -= size
                    messages.append(message)
                scanned += 1
                position = message.offset + 1
        if not entries:
            position = min(max(position, page.floor), end)
        return ReadResult(topic.name, queue, offset, start, position, end, messages)

    # ================================================================ offsets
    def offsets(
        self,
        topic_name: str,
        *,
        queue: int | None = None,
        timestamp_ms: int | None = None,
        include_min: bool = True,
    ) -> list[QueueOffsetInfo]:
        """Per queue (or one): the retained range and, with ``timestamp_ms``, the lowest
        offset stored at or after it (the queue's end when nothing is). Without
        ``include_min`` (and timestamp) it is one batched read of the heads, no index query:
        the cheap way to see which queues have new messages."""
        if timestamp_ms is not None:
            check_timestamp(timestamp_ms)
        topic = self._topics.active(topic_name)
        queues = list(range(topic.queues)) if queue is None else [check_queue(topic, queue)]
        heads = self._heads.get_many(topic.name, queues)
        now_s = self._clock() // 1000
        found = []
        for q in queues:
            end = heads[q].next_offset
            if not include_min and timestamp_ms is None:
                found.append(QueueOffsetInfo(q, None, end))
                continue
            low = self._index.first_offset(topic.name, q, now_s=now_s, end=end)
            at = None
            if timestamp_ms is not None:
                at = max(low, self.offset_for_timestamp(topic.name, q, timestamp_ms, end=end))
            found.append(QueueOffsetInfo(q, low, end, at))
        return found

    def offset_for_timestamp(self, topic: str, queue: int, timestamp_ms: int, *, end: int) -> int:
        """The lowest offset stored at or after ``timestamp_ms`` (``end`` if none), from the
        index's stored timestamps only (no object is read). May be below the retained range
        while TTL has not removed expired index items: callers clamp it."""
        return self._index.offset_at_time(
            topic, queue, timestamp_ms, end=end, limit=TIMESTAMP_SEARCH_BATCHES
        )
