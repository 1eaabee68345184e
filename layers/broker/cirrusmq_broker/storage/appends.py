"""Appending batches: one DynamoDB transaction per produce request.

Per queue touched the transaction advances the queue's head (conditional on the offset the
appender expects and on the head being open) and puts the index item at that offset; when
the producer stamped the request, it also records the idempotency record. A lost race for
a head re-reads that head and tries again; a taken idempotency record means the request
was already stored; a closed head means the topic was deleted.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..errors import Busy, StorageContended
from ..model import IndexEntry, ProducerStamp, stream_id
from .dynamo import cancellation_codes, error_code
from .log_index import LogIndex
from .producers import ProducerRecord, ProducerRecords
from .queue_heads import QueueHeads

CONDITION_FAILED = "ConditionalCheckFailed"


@dataclass(frozen=True)
class PendingBatch:
    """A batch object already written to S3, waiting for its offsets."""

    topic: str
    queue: int
    object_key: str
    count: int
    size_bytes: int
    min_timestamp: int
    max_timestamp: int
    stored_timestamp: int
    key_filter: bytes | None = None
    held_until: int | None = None

    def at(self, base_offset: int) -> IndexEntry:
        return IndexEntry(
            self.topic,
            self.queue,
            base_offset,
            self.count,
            self.object_key,
            self.size_bytes,
            self.min_timestamp,
            self.max_timestamp,
            self.stored_timestamp,
            self.key_filter,
            self.held_until,
        )


class AlreadyRecorded(Exception):
    """The producer id + sequence was stored before: nothing was appended now."""


class QueueClosed(Exception):
    """The topic was deleted: its queues take no more appends."""


class ExtraItemRejected(Exception):
    """A condition of one of the caller's extra transaction items failed: nothing was
    appended. ``positions`` are the indexes (in ``extra_items``) that failed."""

    def __init__(self, positions: list[int]) -> None:
        super().__init__(f"extra transaction items refused: {positions}")
        self.positions = positions


RecordBuilder = Callable[[dict[int, int]], ProducerRecord]
"""Builds the idempotency record from the base offset each queue got."""
StreamRecordBuilder = Callable[[dict[tuple[str, int], int]], ProducerRecord]
"""Builds the idempotency record from the base offset each (topic, queue) got."""


class BatchAppender:
    """Runs the append transaction, racing other producers for the queues' heads.

    Heads are cached per process, so an append issues no read unless it lost a race or
    the queue is cold.
    """

    def __init__(
        self,
        client: Any,
        index: LogIndex,
        heads: QueueHeads,
        producers: ProducerRecords,
        *,
        max_attempts: int = 25,
    ) -> None:
        self._client = client
        self._index = index
        self._heads = heads
        self._producers = producers
        self._max_attempts = max_attempts
        self._tails: dict[str, int] = {}
        self._lock = threading.Lock()

    def forget_topic(self, topic: str) -> None:
        """The topic was created again: its cached heads belong to the old log."""
        with self._lock:
            for stream in [s for s in self._tails if s.rsplit("#", 1)[0] == topic]:
                del self._tails[stream]

    def append(
        self,
        batches: list[PendingBatch],
        *,
        stamp: ProducerStamp | None,
        build_record: RecordBuilder,
        expires_at: int,
        record_expires_at: int,
        extra_items: list[dict[str, Any]] | None = None,
    ) -> dict[int, int]:
        """Append every batch (of one topic); returns queue → base offset.

        ``extra_items`` (transaction items, e.g. timer puts or deletes) commit atomically
        with the append. Raises AlreadyRecorded, QueueClosed, ExtraItemRejected or Busy;
        nothing is appended then.
        """
        bases = self.append_streams(
            batches,
            stamp=stamp,
            build_record=lambda streams: build_record({q: b for (_, q), b in streams.items()}),
            expires_at=expires_at,
            record_expires_at=record_expires_at,
            extra_items=extra_items,
        )
        return {queue: base for (_, queue), base in bases.items()}

    def append_streams(
        self,
        batches: list[PendingBatch],
        *,
        stamp: ProducerStamp | None,
        build_record: StreamRecordBuilder,
        expires_at: int | Mapping[str, int],
        record_expires_at: int,
        extra_items: list[dict[str, Any]] | None = None,
    ) -> dict[tuple[str, int], int]:
        """:meth:`append` for batches of one or more topics (one batch per queue); returns
        (topic, queue) → base offset. ``expires_at``: of every index item, or per topic."""
        extra_items = list(extra_items or [])
        for attempt in range(self._max_attempts):
            bases = {(b.topic, b.queue): self._next_offset(b.topic, b.queue) for b in batches}
            items = []
            for b in batches:
                base = bases[(b.topic, b.queue)]
                items.append(self._heads.advance_request(b.topic, b.queue, base, base + b.count))
                expiry = expires_at if isinstance(expires_at, int) else expires_at[b.topic]
                items.append(self._index.put_request(b.at(base), expires_at=expiry))
            if stamp is not None:
                record = build_record(bases)
                items.append(
                    self._producers.put_request(stamp, record, expires_at=record_expires_at)
                )
            items.extend(extra_items)
            try:
                # A resend of this very request (lost response) must not fail on its own
                # commit: DynamoDB answers a repeated token with the first outcome.
                self._client.transact_write_items(
                    TransactItems=items, ClientRequestToken=uuid.uuid4().hex
                )
            except ClientError as exc:
                self._after_cancellation(exc, batches, stamp, attempt)
                continue
            except StorageContended:  # TransactionConflict / throttling only: back off, jitter
                _back_off(attempt)
                continue
            for b in batches:
                self._remember(b.topic, b.queue, bases[(b.topic, b.queue)] + b.count)
            return bases
        raise Busy("the queue tail is contended; retry the request")

    def _next_offset(self, topic: str, queue: int) -> int:
        with self._lock:
            cached = self._tails.get(stream_id(topic, queue))
        return cached if cached is not None else self._refresh(topic, queue)

    def _refresh(self, topic: str, queue: int) -> int:
        head = self._heads.get(topic, queue)
        if head.closed:
            raise QueueClosed(topic)
        with self._lock:
            self._tails[stream_id(topic, queue)] = head.next_offset
        return head.next_offset

    def _remember(self, topic: str, queue: int, tail: int) -> None:
        stream = stream_id(topic, queue)
        with self._lock:
            self._tails[stream] = max(tail, self._tails.get(stream, 0))

    def _after_cancellation(
        self,
        exc: ClientError,
        batches: list[PendingBatch],
        stamp: ProducerStamp | None,
        attempt: int,
    ) -> None:
        if error_code(exc) != "TransactionCanceledException":
            raise exc
        codes = cancellation_codes(exc)
        record_code = codes[2 * len(batches)] if len(codes) > 2 * len(batches) else None
        if stamp is not None and record_code == CONDITION_FAILED:
            raise AlreadyRecorded() from exc
        extras = codes[2 * len(batches) + (1 if stamp is not None else 0) :]
        refused = [i for i, code in enumerate(extras) if code == CONDITION_FAILED]
        if refused:
            raise ExtraItemRejected(refused) from exc
        lost = [b for i, b in enumerate(batches) if CONDITION_FAILED in codes[2 * i : 2 * i + 2]]
        for batch in lost:
            self._refresh(batch.topic, batch.queue)  # raises QueueClosed for a deleted topic
        if not lost:
            _back_off(attempt)


def _back_off(attempt: int) -> None:
    """A short wait with jitter before sending a contended transaction again."""
    time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))
