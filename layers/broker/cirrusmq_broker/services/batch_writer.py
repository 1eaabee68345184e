"""The one path a batch takes into a queue: encode it, write its object, append it.

Every writer goes through :class:`BatchWriter`: produce, the moves (retry, dead letter,
redrive), the release of delayed messages and transaction commits. An object that a re-run may find
and reuse is never trusted by a name derived from the request alone:

- :func:`content_named`: the name ends with a digest of exactly the bytes the object
  holds, so a re-run whose inputs changed in between (an ack, a cancel, a due time that
  passed) writes an object of its own; a re-run with the same bytes reuses the first one;
- :func:`rows_named`: the name ends with a digest of exactly the rows the object holds,
  every field but the times the broker stamps (born when the sender gave none, stored):
  a retried send reuses its first attempt's object even though its clock moved, and one
  whose rows changed (a delayed message became due meanwhile) writes its own;
- :func:`fixed_name`: an object already under the name is reused only when it holds the
  very bytes (one GET, on the re-run path only); other content raises TopicObjectTaken.

So an index item's ``count`` is always the row count of the object it names. A reused
object must be younger than REUSE_EXISTING_OBJECT_SECONDS (the orphan sweeper may take an
older unindexed one at any moment): then the batch is written again under a fresh name.
The normal case costs one S3 PUT (If-None-Match) and the append's one transaction.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..model import NewMessage, ProducerStamp, SystemFields, Topic
from ..rules import key_filter
from ..storage.appends import BatchAppender, PendingBatch, RecordBuilder, StreamRecordBuilder
from ..storage.batch_objects import REUSE_EXISTING_OBJECT_SECONDS, BatchObjectStore

_JSON = json.JSONEncoder(separators=(",", ":"))
SYSTEM_FIELDS = tuple(f.name for f in dataclasses.fields(SystemFields))
"""The system fields a row's digest covers, in order (all scalars: no deep copy needed)."""
CONTENT_DIGEST_CHARS = 40
"""Hex characters of the SHA-256 of the bytes in a content-addressed name (160 bits)."""


@dataclass(frozen=True)
class Naming:
    """How a batch object is named: fresh (a ULID, never reused), content-addressed
    (``<prefix><sha256 of the bytes>``) or fixed (reused only when byte-identical)."""

    kind: Literal["fresh", "content", "rows", "fixed"]
    name: str = ""


FRESH = Naming("fresh")
"""A name no other attempt uses: for writers whose re-run never looks for the object."""


def content_named(prefix: str) -> Naming:
    """``<prefix><digest of the bytes>``: equal names hold equal bytes."""
    return Naming("content", prefix)


def rows_named(prefix: str, messages: Sequence[NewMessage]) -> Naming:
    """``<prefix><digest of the rows>``: equal names hold equal rows (but for the times
    the broker stamps), in the same order."""
    digest = hashlib.sha256()
    for m in messages:
        fields = [
            m.message_id,
            hashlib.sha256(m.body).hexdigest(),
            m.tag,
            list(m.keys),
            sorted(m.properties.items()),
            m.message_group,
            [getattr(m.system, name) for name in SYSTEM_FIELDS],
        ]
        digest.update(_JSON.encode(fields).encode() + b"\n")
    return Naming("rows", f"{prefix}{digest.hexdigest()[:CONTENT_DIGEST_CHARS]}")


def fixed_name(name: str) -> Naming:
    """``name`` exactly; an existing object under it is reused only if byte-identical."""
    return Naming("fixed", name)


@dataclass(frozen=True)
class EncodedBatch:
    """One queue's batch as the bytes of its object, with what its index item records."""

    topic: Topic
    queue: int
    data: bytes
    count: int
    """Rows in ``data``: the index item's count."""
    min_timestamp: int
    max_timestamp: int
    stored_timestamp: int
    key_filter: bytes | None = None
    """The index item's filter of the rows' keys (None: may hold any key)."""
    held_until: int | None = None
    """The index item's latest not-before time still ahead (None: nothing held)."""


@dataclass(frozen=True)
class WrittenBatch:
    """A batch whose object is in S3, waiting for its offsets."""

    pending: PendingBatch
    own: bool
    """Only this attempt can know the object (a fresh name): safe to delete when the
    append is refused. A derived name may be another attempt's too: left to the sweeper."""

    @property
    def object_key(self) -> str:
        return self.pending.object_key


def encode(
    topic: Topic,
    queue: int,
    messages: Sequence[NewMessage],
    *,
    stored_timestamp: int,
    stamp: ProducerStamp | None = None,
) -> EncodedBatch:
    """Encode ``messages`` as one batch object of ``topic``/``queue``."""
    from ..codec import encode_batch  # pyarrow: only for handlers that write batches

    data = encode_batch(messages, stored_timestamp=stored_timestamp, stamp=stamp)
    return EncodedBatch(
        topic,
        queue,
        data,
        len(messages),
        min(m.born_timestamp for m in messages),
        max(m.born_timestamp for m in messages),
        stored_timestamp,
        key_filter.build(k for m in messages for k in m.keys),
        held_until(messages, stored_timestamp),
    )


def held_until(messages: Sequence[NewMessage], stored_timestamp: int) -> int | None:
    """The latest delivery time of ``messages`` after ``stored_timestamp``: a message in
    the topic's log whose delivery time is still ahead was sent with a not-before time
    (a delayed message is appended only once due)."""
    ahead = [
        m.system.delivery_timestamp
        for m in messages
        if m.system.delivery_timestamp is not None
        and m.system.delivery_timestamp > stored_timestamp
    ]
    return max(ahead, default=None)


class BatchWriter:
    """Writes batch objects and appends them (through one :class:`BatchAppender`)."""

    def __init__(self, objects: BatchObjectStore, appender: BatchAppender) -> None:
        self._objects = objects
        self._appender = appender

    def forget_topic(self, topic: str) -> None:
        """The topic was created again: its cached heads belong to the old log."""
        self._appender.forget_topic(topic)

    def write(self, batch: EncodedBatch, naming: Naming) -> WrittenBatch:
        """Write the batch's object as ``naming`` says; returns the batch to append."""
        topic = batch.topic
        if naming.kind == "fresh":
            key, own = self._fresh(batch), True
        else:
            name = naming.name
            if naming.kind == "content":
                digest = hashlib.sha256(batch.data).hexdigest()[:CONTENT_DIGEST_CHARS]
                name = f"{naming.name}{digest}"
            hours = topic.retention_hours
            key = self._objects.key_for(
                topic.name, batch.queue, batch.stored_timestamp, name, retention_hours=hours
            )
            if naming.kind == "fixed":
                written = self._objects.put_or_match(key, batch.data, retention_hours=hours)
            else:
                written = self._objects.put(key, batch.data, retention_hours=hours)
            own = False
            if not written and self._objects.age_seconds(key) >= REUSE_EXISTING_OBJECT_SECONDS:
                key, own = self._fresh(batch), True
        return WrittenBatch(
            PendingBatch(
                topic.name,
                batch.queue,
                key,
                batch.count,
                len(batch.data),
                batch.min_timestamp,
                batch.max_timestamp,
                batch.stored_timestamp,
                batch.key_filter,
                batch.held_until,
            ),
            own,
        )

    def _fresh(self, batch: EncodedBatch) -> str:
        hours = batch.topic.retention_hours
        key = self._objects.key_for(
            batch.topic.name, batch.queue, batch.stored_timestamp, retention_hours=hours
        )
        self._objects.put(key, batch.data, retention_hours=hours)
        return key

    def append(
        self,
        batches: Sequence[WrittenBatch],
        *,
        stamp: ProducerStamp | None,
        build_record: RecordBuilder,
        expires_at: int,
        record_expires_at: int,
        extra_items: list[dict[str, Any]] | None = None,
    ) -> dict[int, int]:
        """Append the written batches in one transaction; returns queue -> base offset.
        Raises as :meth:`BatchAppender.append` does (nothing is appended then)."""
        return self._appender.append(
            [b.pending for b in batches],
            stamp=stamp,
            build_record=build_record,
            expires_at=expires_at,
            record_expires_at=record_expires_at,
            extra_items=extra_items,
        )

    def append_streams(
        self,
        batches: Sequence[WrittenBatch],
        *,
        stamp: ProducerStamp | None,
        build_record: StreamRecordBuilder,
        expires_at: int | Mapping[str, int],
        record_expires_at: int,
        extra_items: list[dict[str, Any]] | None = None,
    ) -> dict[tuple[str, int], int]:
        """:meth:`append` for batches of several topics; returns (topic, queue) -> base
        offset (:meth:`BatchAppender.append_streams`)."""
        return self._appender.append_streams(
            [b.pending for b in batches],
            stamp=stamp,
            build_record=build_record,
            expires_at=expires_at,
            record_expires_at=record_expires_at,
            extra_items=extra_items,
        )
