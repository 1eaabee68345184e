"""Produce: validate a batch, write one object per queue touched, append it to the log."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ulid import ULID

from .. import limits
from ..errors import (
    Busy,
    IdempotencyConflict,
    InvalidMessage,
    TooManyQueues,
    TopicNotFound,
    TransactionRequired,
)
from ..model import MessageInput, MessageType, NewMessage, ProducerStamp, SendReceipt, Topic
from ..storage.appends import AlreadyRecorded, ExtraItemRejected, QueueClosed
from ..storage.batch_objects import BatchObjectStore
from ..storage.log_index import LogIndex
from ..storage.producers import ProducerRecord, ProducerRecords
from ..validation import (
    check_producer_id,
)
from .batch_writer import FRESH, BatchWriter, WrittenBatch, encode, rows_named
from .delays.schedule import DelayWriter, delayed_receipt, due_times
from .delays.wake import ReleaseWake
from .message_validation import validate_messages
from .topic_catalog import TopicCatalog
from .trace import record_sent

_JSON = json.JSONEncoder(separators=(",", ":"))
MAX_APPEND_ITEMS = 100
"""DynamoDB TransactWriteItems' limit: one send is one append."""
MAX_QUEUES_PER_SEND = (MAX_APPEND_ITEMS - 1) // 2
"""49: one send is one append (2 items per queue + its producer record <= 100 items)."""


@dataclass(frozen=True)
class SendResult:
    receipts: list[SendReceipt]
    duplicate: bool
    """True when the producer id + sequence was stored before: nothing was stored now."""


class ProduceService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        objects: BatchObjectStore,
        writer: BatchWriter,
        index: LogIndex,
        producers: ProducerRecords,
        clock: Callable[[], int],
        delay_writer: DelayWriter | None = None,
        wake: ReleaseWake | None = None,
    ) -> None:
        self._delay_writer = delay_writer
        self._wake = wake
        self._topics = topics
        self._objects = objects
        self._writer = writer
        self._index = index
        self._producers = producers
        self._clock = clock
        self._round_robin: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()
        self._uploads = ThreadPoolExecutor(max_workers=8, thread_name_prefix="batch-put")
        self._incarnations: dict[str, int] = {}

    def send(
        self,
        topic_name: str,
        inputs: Sequence[MessageInput],
        stamp: ProducerStamp | None = None,
        *,
        deduplication_ms: int | None = None,
    ) -> SendResult:
        """Store a batch; with a stamp, a repeated request returns the original receipts.

        With ``deduplication_ms`` (SQS FIFO's deduplication interval) the stamp holds for
        that long from its first accepted send: a send with it within that time stores
        nothing and answers the first send's receipts whatever it carries; a later one is a
        new message that takes the stamp over (the record's put replaces a record older
        than the window, in the append's transaction: no read before it). Such a send
        holds one message, sent now.

        A refused request (4xx) leaves nothing behind: objects it wrote are deleted again.
        """
        topic = self._topics.active(topic_name)
        if topic.message_type is MessageType.TRANSACTION:
            raise TransactionRequired(
                f"topic {topic.name!r} is a TRANSACTION topic: send its messages in a "
                "transaction (TransactionProducer; docs/transactions.md)"
            )
        self._notice_incarnation(topic)
        if stamp is not None:
            check_producer_id(stamp.producer_id)
        now = self._clock()
        messages = self._validate(topic, inputs, now, None if deduplication_ms else stamp)
        dues = due_times(topic, inputs, now)
        if deduplication_ms is not None:
            _check_deduplicated(stamp, inputs, dues)
        digest = request_digest(topic.name, inputs) if stamp else ""
        routed = self._route(topic, messages, stamp)
        by_queue, delayed = split_delayed(routed, messages, dues)
        if len(by_queue) > MAX_QUEUES_PER_SEND:  # one atomic append: <= 100 items
            raise TooManyQueues(
                f"this send routes to {len(by_queue)} queues; one send appends to at most "
                f"{MAX_QUEUES_PER_SEND} (use fewer message groups per request)",
                details={"queues": len(by_queue), "max_queues": MAX_QUEUES_PER_SEND},
            )
        delay_key, delay_puts = None, []
        if delayed:
            if self._delay_writer is None:
                raise InvalidMessage("this service takes no delayed messages")
            delay_key, delay_puts = self._delay_writer.write(topic, delayed, now, stamp, digest)
            if 2 * len(by_queue) + 1 + len(delay_puts) > MAX_APPEND_ITEMS:
                self._delay_writer.discard(delay_key)
                raise TooManyQueues(
                    f"this send appends to {len(by_queue)} queues and writes "
                    f"{len(delay_puts)} delay items: more than one atomic append holds "
                    f"({MAX_APPEND_ITEMS} items: 2 per queue + 1 + 1 per delay item); "
                    "split the batch",
                    details={"queues": len(by_queue), "timer_items": len(delay_puts)},
                )
        try:
            batches, fresh = self._write_batches(
                topic, by_queue, now, stamp, digest, named=deduplication_ms is None
            )
        except BaseException:
            if delay_key:
                self._delay_writer.discard(delay_key)  # type: ignore[union-attr]
            raise

        def receipts_for(bases: dict[int, int], scheduled_at: int | None) -> list[SendReceipt]:
            # Which messages were delayed follows from the time the first attempt stored.
            dues = due_times(topic, inputs, scheduled_at) if scheduled_at else []
            immediate, later = split_delayed(routed, messages, dues)
            positions = {q: itertools.count(bases[q]) for q in immediate}
            placed = {
                m.message_id: SendReceipt(m.message_id, q, next(positions[q]))
                for q, ms in immediate.items()
                for m in ms
            }
            placed.update(
                (m.message_id, delayed_receipt(m, q, due))
                for q, rows in later.items()
                for m, due in rows
            )
            return [placed[m.message_id] for m in messages]

        retention_expiry = now // 1000 + topic.retention_hours * 3600
        record_seconds = limits.IDEMPOTENCY_WINDOW_SECONDS
        if deduplication_ms is not None:
            record_seconds = -(-deduplication_ms // 1000) + 1

        def build_record(bases: dict[int, int]) -> ProducerRecord:
            if deduplication_ms is None:
                return ProducerRecord(digest, bases, now if delayed else None)
            ids = tuple(m.message_id for m in messages)
            return ProducerRecord(digest, bases, None, None, now, deduplication_ms, ids)

        try:
            bases = self._writer.append(
                batches,
                stamp=stamp,
                build_record=build_record,
                expires_at=retention_expiry,
                record_expires_at=now // 1000 + record_seconds,
                extra_items=delay_puts,
            )
        except AlreadyRecorded:
            assert stamp is not None
            if deduplication_ms is not None:
                return self._deduplicated(topic, stamp, fresh)
            if delay_key:  # the first attempt's delay object holds these messages
                self._delay_writer.discard(delay_key)  # type: ignore[union-attr]
            try:
                record = self._recorded(stamp, digest)
            except IdempotencyConflict:
                # Our object names carry our digest: no other request indexes them.
                self._objects.delete([b.object_key for b in batches])
                raise
            first, _ = split_delayed(
                routed,
                messages,
                due_times(topic, inputs, record.scheduled_at) if record.scheduled_at else [],
            )
            if not set(first) <= set(record.bases):  # recorded for an older incarnation
                self._objects.delete(fresh)
                raise IdempotencyConflict(
                    f"producer {stamp.producer_id!r} sequence {stamp.sequence} was used for a "
                    f"topic {topic.name!r} with other queues; use a new sequence"
                ) from None
            result = SendResult(receipts_for(record.bases, record.scheduled_at), duplicate=True)
            self._objects.delete(self._unindexed(topic, record.bases, fresh))
            self._due(result.receipts)  # the first attempt may have died before its wake
            return result
        except QueueClosed as exc:
            # Nothing of this stamp or request was appended (a recorded stamp would have
            # answered AlreadyRecorded), and the closed queues take no retry: drop them all.
            self._objects.delete([b.object_key for b in batches])
            if delay_key:
                self._delay_writer.discard(delay_key)  # type: ignore[union-attr]
            self._topics.forget(topic.name)
            raise TopicNotFound(f"topic {topic.name!r} does not exist") from exc
        except (Busy, ExtraItemRejected):
            # Every attempt was cancelled: no delay item refers to it. (Any other failure
            # may hide a commit whose answer was lost: the object stays, to its lifecycle.)
            if delay_key:
                self._delay_writer.discard(delay_key)  # type: ignore[union-attr]
            raise
        result = SendResult(receipts_for(bases, now if delayed else None), duplicate=False)
        record_sent(topic, messages, result.receipts, stamp.producer_id if stamp else None)
        self._due(result.receipts)
        return result

    def _deduplicated(self, topic: Topic, stamp: ProducerStamp, fresh: list[str]) -> SendResult:
        """A deduplicating send whose stamp is held: the holder's receipts; our objects,
        which nothing indexes, are deleted."""
        record = self._producers.get(stamp)
        if record is None or not record.message_ids:  # expired between the put and the read
            self._objects.delete(fresh)
            raise Busy("the deduplication record changed while sending; retry the request")
        ((queue, base),) = record.bases.items()
        receipts = [SendReceipt(m, queue, base + i) for i, m in enumerate(record.message_ids)]
        self._objects.delete(self._unindexed(topic, record.bases, fresh))
        return SendResult(receipts, duplicate=True)

    def _due(self, receipts: list[SendReceipt]) -> None:
        """Wake a release run for delayed messages due before the next scheduled one."""
        dues = [r.delivery_timestamp for r in receipts if r.delivery_timestamp is not None]
        if dues and self._wake is not None and self._delay_writer is not None:
            self._wake.due_at(dues, self._delay_writer.items.runs)

    def _notice_incarnation(self, topic: Topic) -> None:
        """A topic deleted and created again starts a new log: drop the old cached tails."""
        known = self._incarnations.setdefault(topic.name, topic.created_timestamp)
        if known != topic.created_timestamp:
            self._writer.forget_topic(topic.name)
            self._incarnations[topic.name] = topic.created_timestamp

    def _write_batches(
        self,
        topic: Topic,
        by_queue: dict[int, list[NewMessage]],
        now: int,
        stamp: ProducerStamp | None,
        digest: str,
        *,
        named: bool = True,
    ) -> tuple[list[WrittenBatch], list[str]]:
        """One object per queue, written in parallel.

        Returns the batches awaiting their offsets, and the keys of the objects that only
        this attempt can reference (safe to delete if it is refused).

        A stamped request's object is named after producer id, sequence, request digest and
        the digest of its rows: a retry that stores the same rows finds the object its
        first attempt wrote and indexes that one instead of a second copy; a retry whose
        rows differ (a delayed message became due in between) writes its own. A
        deduplicating send (not ``named``) writes its own object every time: its repeat
        answers from the record, never from a second append.
        """
        prefix = (
            f"{stamp.producer_id}-{stamp.sequence}-{_scope_tag(stamp)}{digest[:16]}-"
            if stamp
            else ""
        )
        work = [
            (
                encode(topic, q, ms, stored_timestamp=now, stamp=stamp),
                rows_named(prefix, ms) if stamp and named else FRESH,
            )
            for q, ms in by_queue.items()
        ]
        batches = list(self._uploads.map(lambda w: self._writer.write(*w), work))
        return batches, [b.object_key for b in batches if b.own]

    def _unindexed(self, topic: Topic, bases: dict[int, int], keys: list[str]) -> list[str]:
        """Those of ``keys`` the recorded batches do not name (safe to delete)."""
        if not keys:
            return []
        named = set()
        for queue, base in bases.items():
            entry = self._index.entry_at(topic.name, queue, base)
            if entry is None:
                return []  # cannot tell: keep them, the sweeper decides later
            named.add(entry.object_key)
        return [key for key in keys if key not in named]

    def _recorded(self, stamp: ProducerStamp, digest: str) -> ProducerRecord:
        """The record of the first request with this stamp (which had this payload)."""
        record = self._producers.get(stamp)
        if record is None:  # expired between the failed put and this read
            raise IdempotencyConflict("the producer sequence was used before and has expired")
        if record.digest != digest:
            raise IdempotencyConflict(
                f"producer {stamp.producer_id!r} sequence {stamp.sequence} was already used "
                "for a different batch"
            )
        return record

    def _validate(
        self,
        topic: Topic,
        inputs: Sequence[MessageInput],
        now: int,
        stamp: ProducerStamp | None,
    ) -> list[NewMessage]:
        return validate_messages(topic, inputs, now, lambda p: _generated_id(stamp, p))

    def _route(
        self, topic: Topic, messages: list[NewMessage], stamp: ProducerStamp | None
    ) -> dict[int, list[NewMessage]]:
        """:func:`route`; ungrouped messages of an unstamped request go round-robin."""
        return route(
            topic,
            messages,
            lambda: stamp_queue(topic, stamp) if stamp else self._next_queue(topic),
        )

    def _next_queue(self, topic: Topic) -> int:
        with self._lock:
            counter = self._round_robin.setdefault(
                topic.name, itertools.count(random.randrange(topic.queues))
            )
            return next(counter) % topic.queues


def route(
    topic: Topic, messages: list[NewMessage], ungrouped: Callable[[], int]
) -> dict[int, list[NewMessage]]:
    """Grouped messages by hash of their group; the rest together to the one queue
    ``ungrouped()`` names (asked once). For a stamped request that is :func:`stamp_queue`,
    so a retry of it routes exactly as the first attempt did."""
    by_queue: dict[int, list[NewMessage]] = {}
    ungrouped_queue: int | None = None
    for message in messages:
        if message.message_group is not None:
            queue = zlib.crc32(message.message_group.encode()) % topic.queues
        else:
            if ungrouped_queue is None:
                ungrouped_queue = ungrouped()
            queue = ungrouped_queue
        by_queue.setdefault(queue, []).append(message)
    return by_queue


def stamp_queue(topic: Topic, stamp: ProducerStamp) -> int:
    """The queue of a stamped request's ungrouped messages: a hash of the stamp."""
    return zlib.crc32(f"{stamp.producer_id}#{stamp.sequence}".encode()) % topic.queues


def split_delayed(
    routed: dict[int, list[NewMessage]], messages: list[NewMessage], dues: list[int | None]
) -> tuple[dict[int, list[NewMessage]], dict[int, list[tuple[NewMessage, int]]]]:
    """Routed messages split into those appended now and (message, due) of delayed ones."""
    due_of = {m.message_id: due for m, due in zip(messages, dues, strict=False)}
    now_part: dict[int, list[NewMessage]] = {}
    later: dict[int, list[tuple[NewMessage, int]]] = {}
    for queue, ms in routed.items():
        for m in ms:
            due = due_of.get(m.message_id)
            if due is None:
                now_part.setdefault(queue, []).append(m)
            else:
                later.setdefault(queue, []).append((m, due))
    return now_part, later


def _check_deduplicated(
    stamp: ProducerStamp | None, inputs: Sequence[MessageInput], dues: list[int | None]
) -> None:
    """A deduplicating send is stamped and holds one message, sent now."""
    if stamp is None:
        raise InvalidMessage("a deduplicated send needs a producer stamp")
    if len(inputs) != 1 or any(due is not None for due in dues):
        raise InvalidMessage("a deduplicated send holds one message, sent now (no delay)")


def _generated_id(stamp: ProducerStamp | None, position: int) -> str:
    """A broker-made id; for a stamped request the same on every retry."""
    return f"{stamp.producer_id}.{stamp.sequence}.{position}" if stamp else str(ULID())


def request_digest(topic: str, inputs: Sequence[MessageInput]) -> str:
    """A fingerprint of the request, to tell a retry from a reuse of the same sequence."""
    h = hashlib.sha256(topic.encode())
    for m in inputs:
        h.update(hashlib.sha256(m.body).digest())
        fields = [m.message_id, m.tag, list(m.keys), sorted(m.properties.items()), m.message_group]
        if m.delay_level is not None or m.delivery_timestamp is not None:
            fields += [m.delay_level, m.delivery_timestamp]
        h.update(_JSON.encode(fields).encode())
    return h.hexdigest()


def _scope_tag(stamp: ProducerStamp) -> str:
    """A short tag of the stamp's scope (the sending key) for object names: two keys' sends
    with the same producer id and sequence never share an object."""
    return hashlib.sha256(stamp.scope.encode()).hexdigest()[:8] + "-" if stamp.scope else ""
