"""Appending batches at the end of their queues' logs.

The log of a queue is the chain of its index items: an append puts its item at the
offset where the log ends, only where no item is, so two appends never share an offset.
Then the queue's head is moved past it (``queue_heads``), which publishes it to readers.

A plain append (one queue's batch, nothing else to commit with it) does that in plain
conditional writes: the producer's idempotency claim first when the request is stamped
(the record naming where the batch goes, with a token the index item carries), then the
index item, then the head. A crash between them leaves nothing a reader sees but a claim,
or an item beyond its head: a resend of the stamped request finds the claim and finishes
the append, and the next append to the queue walks over the item and publishes it. A
lost race for an offset moves the claim to the log's new end.

An append of several queues' batches (visible all at once), with extra items (timers,
lease settles, a transaction's records) or with a record that must be written with it (a
deduplicating or a delaying send) is one DynamoDB transaction: each head moved (from at
most the batch's base, still open), each index item, the record, the extra items.

Either way a taken idempotency record means the request was already stored, and a
closed head means the topic was deleted.
"""

from __future__ import annotations

import dataclasses
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
from .queue_heads import Published, QueueHeads

CONDITION_FAILED = "ConditionalCheckFailed"
TAIL_TRUSTED_MS = 60_000
"""How long a cached tail is appended at without reading the log's end again. Far below
the shortest retention (an hour): every index item put after the tail was learned is
still there, so a put at the cached tail lands at the log's end or finds its offset
taken, never on an offset that retention freed inside the log."""
Stream = tuple[str, int]


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
        clock: Callable[[], int],
        max_attempts: int = 25,
    ) -> None:
        self._client = client
        self._index = index
        self._heads = heads
        self._producers = producers
        self._clock = clock
        self._max_attempts = max_attempts
        self._tails: dict[str, tuple[int, int]] = {}
        """stream → (tail, broker ms it was learned at)."""
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
        if not extra_items and len(batches) == 1:  # several queues: visible all at once
            expiry = expires_at if isinstance(expires_at, int) else expires_at[batches[0].topic]
            plain = _PlainAppend(self, batches, stamp, build_record, expiry, record_expires_at)
            if plain.possible():
                return plain.run()
        for attempt in range(self._max_attempts):
            learned_at = self._clock()
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
                self._remember(b.topic, b.queue, bases[(b.topic, b.queue)] + b.count, learned_at)
            return bases
        raise Busy("the queue tail is contended; retry the request")

    def _next_offset(self, topic: str, queue: int) -> int:
        """The queue's tail as cached (learned less than TAIL_TRUSTED_MS ago), else read."""
        with self._lock:
            cached = self._tails.get(stream_id(topic, queue))
        if cached is not None and self._clock() - cached[1] < TAIL_TRUSTED_MS:
            return cached[0]
        return self._refresh(topic, queue)

    def _refresh(self, topic: str, queue: int, *, past_head: bool = False) -> int:
        """Read where the queue's log ends: its head, and with ``past_head`` (after a put
        found its offset taken) past any item put beyond the head and not yet published."""
        learned_at = self._clock()
        head = self._heads.get(topic, queue)
        if head.closed:
            raise QueueClosed(topic)
        tail = head.next_offset
        if past_head:
            tail = self._index.chain_end(topic, queue, head.next_offset)
        with self._lock:
            self._tails[stream_id(topic, queue)] = (tail, learned_at)
        return tail

    def _remember(self, topic: str, queue: int, tail: int, learned_at: int) -> None:
        stream = stream_id(topic, queue)
        with self._lock:
            cached = self._tails.get(stream)
            if cached is None or (tail, learned_at) > cached:
                self._tails[stream] = (tail, learned_at)

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
        for batch in lost:  # raises QueueClosed for a deleted topic
            self._refresh(batch.topic, batch.queue, past_head=True)
        if not lost:
            _back_off(attempt)


def _back_off(attempt: int) -> None:
    """A short wait with jitter before sending a contended transaction again."""
    time.sleep(random.uniform(0, 0.005 * (2 ** min(attempt, 6))))


class _PlainAppend:
    """One append in plain conditional writes (see the module's docstring): the claim
    when stamped, the index items, the heads. Raises as :meth:`BatchAppender.append`."""

    def __init__(
        self,
        appender: BatchAppender,
        batches: list[PendingBatch],
        stamp: ProducerStamp | None,
        build_record: StreamRecordBuilder,
        expires_at: int,
        record_expires_at: int,
    ) -> None:
        self._appender = appender
        self._batches = {(b.topic, b.queue): b for b in batches}
        self._stamp = stamp
        self._build_record = build_record
        self._expires_at = expires_at
        self._record_expires_at = record_expires_at
        self._learned_at = appender._clock()
        self._bases = {s: appender._next_offset(*s) for s in self._batches}
        self._claim: ProducerRecord | None = None
        if stamp is not None:
            record = build_record(self._bases)
            self._claim = dataclasses.replace(record, token=uuid.uuid4().hex)

    def possible(self) -> bool:
        """Whether the request's record may be written apart from its batches (a
        deduplicating or a delaying send's record goes in the append's transaction)."""
        claim = self._claim
        return claim is None or (claim.deduplication_ms is None and claim.scheduled_at is None)

    def run(self) -> dict[Stream, int]:
        resumed = self._claim is not None and self._put_claim()
        for stream in self._batches:
            self._place(stream, resumed)
        for stream, batch in self._batches.items():
            self._publish(batch, self._bases[stream])
        if resumed:
            raise AlreadyRecorded()
        return dict(self._bases)

    def _put_claim(self) -> bool:
        """Put the claim; True if a claim of the same request was there to finish (a
        resend), raising AlreadyRecorded for any other record of the stamp."""
        assert self._claim is not None and self._stamp is not None
        found = self._appender._producers.claim(
            self._stamp, self._claim, expires_at=self._record_expires_at
        )
        if found is None:
            return False
        queues = {queue for _, queue in self._batches}
        if found.token is None or found.digest != self._claim.digest or set(found.bases) != queues:
            raise AlreadyRecorded()
        self._adopt(found)
        return True

    def _adopt(self, claim: ProducerRecord) -> None:
        self._claim = claim
        self._bases = {(topic, queue): claim.bases[queue] for topic, queue in self._batches}

    def _place(self, stream: Stream, resumed: bool) -> None:
        """Put the stream's index item at its base, or find it there already; a base
        another append took moves the claim to the log's end."""
        topic, queue = stream
        token = self._claim.token if self._claim is not None else None
        if resumed and self._published_past(stream):
            # The item at the base was put before the head was read: ours, or another
            # append's (ours cannot be put there any more), or gone (retention, a purge).
            holder = self._index.claim_at(topic, queue, self._bases[stream])
            if holder == token:
                return
            if holder is None:  # ours may have been there: never append it twice
                raise AlreadyRecorded()
            self._move(stream, self._appender._refresh(topic, queue, past_head=True))
        for attempt in range(self._appender._max_attempts):
            base = self._bases[stream]
            entry = self._batches[stream].at(base)
            holder = self._index.put(entry, expires_at=self._expires_at, claim=token)
            if holder is None or (token is not None and holder == token):
                return
            self._move(stream, self._appender._refresh(topic, queue, past_head=True))
            if attempt:
                _back_off(attempt)
        raise Busy("the queue tail is contended; retry the request")

    def _published_past(self, stream: Stream) -> bool:
        """Whether the head has passed the claim's base (read before the item there: an
        unpublished base takes the put, which is the check, whoever races for it)."""
        head = self._appender._heads.get(*stream)
        if head.closed:
            raise QueueClosed(stream[0])
        return head.next_offset > self._bases[stream]

    def _move(self, stream: Stream, tail: int) -> None:
        """Take ``tail`` as the stream's base, moving the claim there first."""
        claim, stamp = self._claim, self._stamp
        if claim is None or stamp is None:
            self._bases[stream] = tail
            return
        bases = {**claim.bases, stream[1]: tail}
        if bases == claim.bases:
            return
        if self._appender._producers.move_claim(stamp, claim, bases):
            self._adopt(dataclasses.replace(claim, bases=bases))
            return
        found = self._appender._producers.get(stamp)  # another attempt moved it
        if found is None or found.token != claim.token:
            raise Busy("the producer's record changed while appending; retry the request")
        self._adopt(found)

    def _publish(self, batch: PendingBatch, base: int) -> None:
        """Move the head past the batch; a topic deleted before that takes it back."""
        published = self._appender._heads.publish(batch.topic, batch.queue, base + batch.count)
        if published is Published.CLOSED:
            token = self._claim.token if self._claim is not None else None
            self._index.take_back(batch.at(base), claim=token)
            raise QueueClosed(batch.topic)
        self._appender._remember(batch.topic, batch.queue, base + batch.count, self._learned_at)

    @property
    def _index(self) -> LogIndex:
        return self._appender._index
