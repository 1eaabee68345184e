"""Internal moves: the broker appends messages it re-publishes (retry, dead letter, redrive).

A move writes ONE batch object under ``topics/`` through the one append path
(services/batch_writer.py), named by its stamp and a digest of its bytes: a re-run that
moves the same messages finds the object its first attempt wrote; one whose messages
changed in between (an ack landed, a lease was split) writes its own, so an index item
never names an object holding other rows. It appends with that stamp (so a re-run after
a commit is AlreadyRecorded and stores nothing twice). The stamp's record digest is derived
from the stamp alone: a re-run after a commit counts as done even if the set of messages
it would move changed in between (see services/retries/lease_expiry.py for why that is safe).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from .. import limits
from ..errors import TopicAlreadyExists, TopicNotFound
from ..model import MessageType, NewMessage, ProducerStamp, Topic, TopicStatus
from ..storage.appends import AlreadyRecorded, QueueClosed
from ..storage.producers import ProducerRecord, ProducerRecords
from ..storage.topics import TopicStore
from .batch_writer import BatchWriter, content_named, encode

INTERNAL_TOPIC_CACHE_SECONDS = 30


@dataclass(frozen=True)
class MoveOutcome:
    """What one :meth:`MoveAppender.store` did."""

    base_offset: int | None
    """The offset of the first message, when they were stored now."""
    recorded_digest: str | None
    """When nothing was stored now: the digest recorded for the stamp before."""


class MoveAppender:
    def __init__(
        self,
        *,
        store: TopicStore,
        writer: BatchWriter,
        producers: ProducerRecords,
        clock: Callable[[], int],
    ) -> None:
        self._store = store
        self._writer = writer
        self._producers = producers
        self._clock = clock
        self._topics: TTLCache[str, Topic] = TTLCache(
            maxsize=4096, ttl=INTERNAL_TOPIC_CACHE_SECONDS
        )
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- topics
    def existing(self, name: str) -> Topic | None:
        """The active topic ``name`` (internal names allowed), cached briefly once found.

        A miss is read consistently and never cached: another container may create the
        topic (its first retry or dead letter) at any moment, and a miss answered from a
        cache would hide it (an empty DLQ listing, a redrive or purge doing nothing, a
        retry not served, a handle of it refused)."""
        with self._lock:
            cached = self._topics.get(name)
        if cached is not None:
            return cached
        topic = self._store.get(name, consistent=True)
        if topic is None or topic.status is not TopicStatus.ACTIVE:
            return None
        with self._lock:
            self._topics[name] = topic
        return topic

    def ensure(self, name: str, queues: int, retention_hours: int) -> Topic:
        """The internal topic ``name``, created on first use."""
        topic = self.existing(name)
        if topic is not None:
            return topic
        fresh = Topic(name, queues, MessageType.NORMAL, retention_hours, self._clock())
        try:
            self._store.create(fresh)
        except TopicAlreadyExists:
            fresh = self._store.get(name, consistent=True) or fresh
        with self._lock:
            self._topics[name] = fresh
        return fresh

    # ---------------------------------------------------------------- appends
    def append(
        self,
        topic: Topic,
        queue: int,
        messages: list[NewMessage],
        stamp: ProducerStamp,
        digest: str | None = None,
        record_keep_seconds: int = 0,
        *,
        fence: list[dict[str, Any]] | None = None,
    ) -> str | None:
        """Append ``messages`` to ``topic``/``queue`` once.

        ``record_keep_seconds``: keep the idempotency record at least this long (default:
        the producers' 7-day window), e.g. as long as the dead letters a redrive sends back.
        ``fence``: conditional transaction items that commit with the append (the settle
        of the leases the messages come from, the claim of the dead letters a redrive sends
        back): ExtraItemRejected, and nothing appended, if one of their conditions fails.

        Returns None when stored now, else the digest recorded for this stamp before
        (nothing is stored now); ``digest`` defaults to one derived from the stamp alone.
        TopicNotFound if the topic was deleted.
        """
        outcome = self.store(
            topic,
            queue,
            messages,
            stamp,
            digest,
            record_keep_seconds,
            fence=fence,
        )
        return outcome.recorded_digest

    def store(
        self,
        topic: Topic,
        queue: int,
        messages: list[NewMessage],
        stamp: ProducerStamp,
        digest: str | None = None,
        record_keep_seconds: int = 0,
        *,
        fence: list[dict[str, Any]] | None = None,
    ) -> MoveOutcome:
        """:meth:`append`, telling also where the messages were stored."""
        now = self._clock()
        digest = digest or stamp_digest(stamp)
        batch = self._writer.write(
            encode(topic, queue, messages, stored_timestamp=now, stamp=stamp),
            content_named(object_name_prefix(stamp, digest)),
        )
        try:
            bases = self._writer.append(
                [batch],
                stamp=stamp,
                build_record=lambda bases: ProducerRecord(digest, bases),
                expires_at=now // 1000 + topic.retention_hours * 3600,
                record_expires_at=now // 1000
                + max(limits.IDEMPOTENCY_WINDOW_SECONDS, record_keep_seconds),
                extra_items=fence,
            )
        except AlreadyRecorded:
            record = self._producers.get(stamp)
            return MoveOutcome(None, record.digest if record is not None else digest)
        except QueueClosed as exc:
            with self._lock:
                self._topics.pop(topic.name, None)
            raise TopicNotFound(f"topic {topic.name!r} does not exist") from exc
        return MoveOutcome(bases.get(queue), None)


def object_name_prefix(stamp: ProducerStamp, digest: str) -> str:
    """How the name of the object a move stamped ``stamp`` with ``digest`` starts: whether
    an index entry is that move's batch shows in its object key."""
    return hashlib.sha256(f"{stamp_digest(stamp)}{digest}".encode()).hexdigest()[:24] + "-"


def is_move_batch(object_key: str, stamp: ProducerStamp, digest: str) -> bool:
    """Whether ``object_key`` names the batch of the move stamped ``stamp`` with ``digest``."""
    return object_key.rsplit("/", 1)[-1].startswith(object_name_prefix(stamp, digest))


def stamp_digest(stamp: ProducerStamp) -> str:
    return hashlib.sha256(f"{stamp.producer_id}#{stamp.sequence}".encode()).hexdigest()
