"""Appending batches: one DynamoDB transaction per produce request.

The transaction holds one conditional index put per queue touched (at that queue's next
offset) and, when the producer stamped the request, its idempotency record. A lost race
for a tail re-reads that tail and tries again; a taken idempotency record means the
request was already stored.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..errors import Busy
from ..model import IndexEntry, ProducerStamp
from .dynamo import cancellation_codes, error_code
from .log_index import LogIndex
from .producers import ProducerRecord, ProducerRecords


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
        )


class AlreadyRecorded(Exception):
    """The producer id + sequence was stored before: nothing was appended now."""


RecordBuilder = Callable[[dict[int, int]], ProducerRecord]
"""Builds the idempotency record from the base offset each queue got."""


class BatchAppender:
    """Runs the append transaction, racing other producers for the queues' tails."""

    def __init__(
        self, client: Any, index: LogIndex, producers: ProducerRecords, *, max_attempts: int = 25
    ) -> None:
        self._client = client
        self._index = index
        self._producers = producers
        self._max_attempts = max_attempts

    def forget_topic(self, topic: str) -> None:
        """The topic was created again: its cached tails belong to the old log."""
        self._index.forget_tails(topic)

    def append(
        self,
        batches: list[PendingBatch],
        *,
        stamp: ProducerStamp | None,
        build_record: RecordBuilder,
        expires_at: int,
        record_expires_at: int,
    ) -> dict[int, int]:
        """Append every batch; returns queue → base offset. Raises AlreadyRecorded or Busy."""
        for attempt in range(self._max_attempts):
            bases = {b.queue: self._index.next_offset(b.topic, b.queue) for b in batches}
            items = [
                self._index.put_request(b.at(bases[b.queue]), expires_at=expires_at)
                for b in batches
            ]
            if stamp is not None:
                record = build_record(bases)
                items.append(
                    self._producers.put_request(stamp, record, expires_at=record_expires_at)
                )
            try:
                self._client.transact_write_items(TransactItems=items)
            except ClientError as exc:
                self._after_cancellation(exc, batches, stamp, attempt)
                continue
            for b in batches:
                self._index.remember_tail(b.topic, b.queue, bases[b.queue] + b.count)
            return bases
        raise Busy("the queue tail is contended; retry the request")

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
        idempotency_code = codes[len(batches)] if len(codes) > len(batches) else None
        if stamp is not None and idempotency_code == "ConditionalCheckFailed":
            raise AlreadyRecorded() from exc
        lost = [
            b for b, code in zip(batches, codes, strict=False) if code == "ConditionalCheckFailed"
        ]
        for batch in lost:
            self._index.refresh_tail(batch.topic, batch.queue)
        if not lost:  # TransactionConflict / throttling: back off a little, with jitter
            time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))
