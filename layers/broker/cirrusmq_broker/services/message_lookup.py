"""Looking a message up by id, without a write per message at produce time.

Ids that carry their time (ULIDs: what the SDK and the broker make) are found through the
index's by-stored-time view: the batches of each queue stored from shortly before that
time on whose born-time range holds it, then the (cached) batch objects. Ids the broker
made for a stamped request (``<producer>.<sequence>.<position>``) are found through the
producer's idempotency record while it is kept (7 days). Any other id is searched for
in the newest batches of each queue only (``RECENT_BATCHES_PER_QUEUE``). An id in UUID form
may be a ULID as SQS spells it (``message_ids``): that ULID is looked for first, then the
id as written.
"""

from __future__ import annotations

import re

from ..errors import MessageNotFound
from ..message_ids import spellings
from ..model import IndexEntry, ProducerStamp, StoredMessage, Topic
from ..storage.log_index import LogIndex
from ..storage.producers import ProducerRecords
from ..validation import check_message_id
from .batch_reader import BatchReader
from .topic_catalog import TopicCatalog

CLOCK_SKEW_MS = 5 * 60 * 1000
"""A producer's clock may run this far ahead of the broker's."""
SEARCH_WINDOW_MS = 24 * 3600 * 1000
"""Batches stored up to this long after a message was born are searched (outbox delays)."""
PAGES_PER_QUEUE = 10
RECENT_BATCHES_PER_QUEUE = 32
MAX_OBJECT_READS = 64
"""Batch objects one lookup reads at most (cached ones are free): a lookup stays fast."""
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_PATTERN = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
STAMPED_ID_PATTERN = re.compile(r"^(?P<producer>.+)\.(?P<sequence>\d{1,19})\.(?P<position>\d+)$")


def ulid_time_ms(message_id: str) -> int | None:
    """The millisecond timestamp a ULID carries (None if it is not a ULID)."""
    text = message_id.upper()
    if not ULID_PATTERN.fullmatch(text):
        return None
    value = 0
    for char in text[:10]:
        value = value * 32 + _CROCKFORD.index(char)
    return value


class MessageLookup:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        reader: BatchReader,
        producers: ProducerRecords,
    ) -> None:
        self._topics = topics
        self._index = index
        self._reader = reader
        self._producers = producers

    def lookup(
        self, topic_name: str, message_id: str, *, access_key: str | None = None
    ) -> StoredMessage:
        """The stored message with ``message_id`` in ``topic_name``; ``access_key`` (the
        caller's) finds a stamped id through the record of a send it made itself."""
        topic = self._topics.active(topic_name)
        check_message_id(message_id)
        self._reads = 0
        ids = spellings(message_id)
        found = (
            next((hit for one in ids if (hit := self._by_time(topic, one)) is not None), None)
            or self._by_stamp(topic, message_id, access_key)
            or self._among_recent(topic, ids)
        )
        if found is None:
            raise MessageNotFound(f"no message {message_id!r} in topic {topic.name!r}")
        return found

    def _by_time(self, topic: Topic, message_id: str) -> StoredMessage | None:
        born = ulid_time_ms(message_id)
        if born is None:
            return None
        for queue in range(topic.queues):
            start, end = born - CLOCK_SKEW_MS, born + SEARCH_WINDOW_MS
            for _ in range(PAGES_PER_QUEUE):
                entries = self._index.stored_between(topic.name, queue, start, end)
                for entry in entries:
                    hit = self._find(entry, message_id) if _may_hold(entry, born) else None
                    if hit is not None:
                        return hit
                if len(entries) < 100:
                    break
                start = entries[-1].stored_timestamp
        return None

    def _among_recent(self, topic: Topic, ids: list[str]) -> StoredMessage | None:
        for queue in range(topic.queues):
            for entry in self._index.newest(topic.name, queue, RECENT_BATCHES_PER_QUEUE):
                hit = self._find(entry, *ids)
                if hit is not None:
                    return hit
        return None

    def _find(self, entry: IndexEntry, *ids: str) -> StoredMessage | None:
        """The message of batch ``entry`` whose id is one of ``ids``."""
        self._reads += 1
        if self._reads > MAX_OBJECT_READS:
            raise MessageNotFound(
                f"message {ids[0]!r} not found within {MAX_OBJECT_READS} batches searched"
            )
        return next((m for m in self._reader.messages(entry) if m.message_id in ids), None)

    def _by_stamp(
        self, topic: Topic, message_id: str, access_key: str | None
    ) -> StoredMessage | None:
        """A broker-made id of a stamped request: the record names its batches. Records are
        per sending key: the caller's own (a producer looking up what it sent), then the
        broker's own stamps (retries, transactions)."""
        match = STAMPED_ID_PATTERN.fullmatch(message_id)
        if match is None:
            return None
        producer, sequence = match["producer"], int(match["sequence"])
        for scope in ([access_key] if access_key else []) + [""]:
            record = self._producers.get(ProducerStamp(producer, sequence, scope))
            for queue, base in (record.bases if record else {}).items():
                entry = self._index.entry_at(topic.name, queue, base)
                hit = self._find(entry, message_id) if entry else None
                if hit is not None:
                    return hit
        return None


def _may_hold(entry: IndexEntry, born: int) -> bool:
    """Whether a batch may hold a message whose id carries ``born`` (skew allowed)."""
    in_born_range = (
        entry.min_timestamp - CLOCK_SKEW_MS <= born <= entry.max_timestamp + CLOCK_SKEW_MS
    )
    return in_born_range or abs(entry.stored_timestamp - born) <= CLOCK_SKEW_MS
