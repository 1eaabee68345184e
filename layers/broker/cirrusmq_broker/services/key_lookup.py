"""Finding a topic's messages by key, newest first, one bounded page at a time.

Nothing is written per message: each batch's index item carries a Bloom filter of its
keys (``rules.key_filter``). A page queries each queue's index items of the stored-time
window newest first (the by-stored-time index), reads only the batch objects whose filter
may hold the key (cached, checked against their item by the batch reader) and keeps the
rows that hold it. Items without a filter may hold any key: their objects are read.

Order: stored time descending, then queue, then offset descending, a total order; the
page token names the last position a page went through, so the next page goes on after
it without duplicates or gaps. The window's end is fixed by the first page (at the
latest, that moment): messages stored after it do not shift later pages. A page stops
at ``limit`` messages or when it has read ``MAX_INDEX_ITEMS`` index items or
``MAX_OBJECT_READS`` objects; it may then hold fewer messages (even none) and a token:
only a page without a token ends the search.

Retention: expired index items are skipped (TTL deletes them late), an object already
removed reads as empty. Half messages of transactions are not in their topic's log until
committed, so uncommitted and rolled-back ones are never found.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import heapq
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InvalidRequest, TopicNotFound
from ..model import IndexEntry, StoredMessage, Topic
from ..rules import key_filter
from ..rules.retries import DLQ_PREFIX, is_internal, retry_parts
from ..storage.log_index import LogIndex
from ..validation import check_group_name, check_keys, check_topic_name
from .batch_reader import BatchReader
from .log_reader import MAX_TIMESTAMP_MS, check_timestamp
from .topic_catalog import TopicCatalog

MAX_PAGE_MESSAGES = 100
DEFAULT_PAGE_MESSAGES = 20
MAX_INDEX_ITEMS = 2000
"""Index items one page reads at most (about 12 read units per 100 items of 250 bytes)."""
MAX_OBJECT_READS = 32
"""Batch objects one page reads at most (matches and false positives; cached ones too)."""
INDEX_PAGE_ITEMS = 200
TOKEN_VERSION = 1
MAX_TOKEN_CHARS = 512
"""Tokens this service makes take about 200 characters."""

Position = tuple[int, int, int]
"""(-stored time, queue, -offset): ascending is newest first."""


class InvalidPageToken(InvalidRequest):
    code = "InvalidPageToken"


@dataclass(frozen=True)
class KeyPage:
    """One page of a lookup by key."""

    messages: list[StoredMessage]
    """Newest first."""
    next_token: str | None
    """Pass it to get the next page; None: nothing more in the window."""


@dataclass
class _Budget:
    index_items: int = 0
    object_reads: int = 0

    @property
    def spent(self) -> bool:
        return self.index_items >= MAX_INDEX_ITEMS or self.object_reads >= MAX_OBJECT_READS


@dataclass(frozen=True)
class _Search:
    """What the first page fixed: the window and the key's digest (a token is only good
    for the search it came from)."""

    begin_ms: int
    end_ms: int
    digest: str
    after: Position | None = field(default=None)


class KeyLookup:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        reader: BatchReader,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._index = index
        self._reader = reader
        self._clock = clock

    def find(
        self,
        topic_name: str,
        key: str,
        *,
        begin_ms: int | None = None,
        end_ms: int | None = None,
        limit: int = DEFAULT_PAGE_MESSAGES,
        page_token: str | None = None,
    ) -> KeyPage:
        """A page of the messages of ``topic_name`` whose keys include ``key``, stored in
        [``begin_ms``, ``end_ms``] (default: the topic's retention up to now)."""
        topic = self._topic(topic_name)
        check_keys([key])
        if not 1 <= limit <= MAX_PAGE_MESSAGES:
            raise InvalidRequest(f"limit is 1-{MAX_PAGE_MESSAGES}")
        now = self._clock()
        digest = _digest(topic.name, key)
        if page_token is None:
            search = self._first(topic, digest, begin_ms, end_ms, now)
        else:
            search = _read_token(page_token, digest)
        budget = _Budget()
        streams = [
            self._queue(topic, q, key, search, now // 1000, budget) for q in range(topic.queues)
        ]
        found: list[StoredMessage] = []
        last = search.after
        # Batches merge in message order (a batch's messages are contiguous in it), and an
        # object is read only when the merge reaches its batch: the budget bounds the reads.
        for _, entry, wanted in heapq.merge(*streams, key=lambda batch: batch[0]):
            if wanted:
                budget.object_reads += 1
                for position, message in self._matches(entry, key, search.after):
                    last = position
                    found.append(message)
                    if len(found) == limit:
                        return KeyPage(found, _token(search, last))
            last = (-entry.stored_timestamp, entry.queue, -entry.base_offset)
            if budget.spent:
                return KeyPage(found, _token(search, last))
        return KeyPage(found, None)

    def _topic(self, name: str) -> Topic:
        """A user topic, or a group's retry or dead-letter topic (their names carry a dot).
        A retry topic keeps what is appended to it as long as its user topic keeps messages
        then (retry_topic.py), which may be longer than the retention it was made with: it
        is searched over the longer of the two."""
        if not is_internal(name):
            return self._topics.active(name)
        parts = retry_parts(name)
        if parts is not None:
            check_group_name(parts[0])
            check_topic_name(parts[1])
        elif name.startswith(DLQ_PREFIX):
            check_group_name(name[len(DLQ_PREFIX) :])
        else:
            check_topic_name(name)  # raises: no user topic's name has a dot
        topic = self._topics.active(name, internal=True)
        if parts is not None:
            with contextlib.suppress(TopicNotFound):  # gone: the retry topic's own
                origin = self._topics.active(parts[1])
                if origin.retention_hours > topic.retention_hours:
                    topic = replace(topic, retention_hours=origin.retention_hours)
        return topic

    def _first(
        self, topic: Topic, digest: str, begin_ms: int | None, end_ms: int | None, now: int
    ) -> _Search:
        for bound in (begin_ms, end_ms):
            if bound is not None:
                check_timestamp(bound)
        retained = now - topic.retention_hours * 3600 * 1000
        begin = retained if begin_ms is None else begin_ms
        end = now if end_ms is None else min(end_ms, now)
        if begin_ms is not None and end_ms is not None and begin_ms > end_ms:
            raise InvalidRequest("begin is after end")
        return _Search(begin, end, digest)

    def _queue(
        self, topic: Topic, queue: int, key: str, search: _Search, now_s: int, budget: _Budget
    ) -> Iterator[tuple[Position, IndexEntry, bool]]:
        """One queue's batches not yet gone through, in order: each with its first
        position and whether its object may hold the key (its filter, not expired)."""
        after = search.after
        upper = search.end_ms if after is None else min(search.end_ms, -after[0])
        if search.begin_ms > upper:  # an empty window: DynamoDB refuses such a BETWEEN
            return
        start: dict[str, Any] | None = None
        held: list[tuple[IndexEntry, int]] = []
        # The merge pulls every queue's first page before it consumes any: those share the
        # budget out; later ones take at most what is left of it.
        limit = max(1, min(INDEX_PAGE_ITEMS, MAX_INDEX_ITEMS // topic.queues))
        while True:
            page, start = self._index.stored_newest_first(
                topic.name, queue, search.begin_ms, upper, limit=limit, after=start
            )
            limit = max(1, min(INDEX_PAGE_ITEMS, MAX_INDEX_ITEMS - budget.index_items))
            budget.index_items += len(page)
            held.extend(page)
            if start is not None and held:  # the oldest millisecond may go on in the next page
                oldest = held[-1][0].stored_timestamp
                ready = [h for h in held if h[0].stored_timestamp > oldest]
                held = [h for h in held if h[0].stored_timestamp == oldest]
            else:
                ready, held = held, []
            ready.sort(key=lambda h: (-h[0].stored_timestamp, -h[0].base_offset))
            for entry, expires_at in ready:
                done = (-entry.stored_timestamp, queue, -entry.base_offset)
                if after is not None and done <= after:
                    continue
                first = (-entry.stored_timestamp, queue, -(entry.base_offset + entry.count - 1))
                wanted = expires_at > now_s and key_filter.may_contain(entry.key_filter, key)
                yield first, entry, wanted
            if start is None:
                return

    def _matches(
        self, entry: IndexEntry, key: str, after: Position | None
    ) -> Iterator[tuple[Position, StoredMessage]]:
        for message in reversed(self._reader.messages(entry)):
            position = (-entry.stored_timestamp, entry.queue, -message.offset)
            if key in message.keys and (after is None or position > after):
                yield position, message


def _digest(topic: str, key: str) -> str:
    text = json.dumps([topic, key]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()[:16]


def _token(search: _Search, last: Position | None) -> str:
    fields = {
        "v": TOKEN_VERSION,
        "d": search.digest,
        "b": search.begin_ms,
        "e": search.end_ms,
        "a": list(last) if last is not None else None,
    }
    return base64.urlsafe_b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode()


def _read_token(token: str, digest: str) -> _Search:
    """The search a token continues; InvalidPageToken if it is malformed or was made for
    another topic or key."""
    try:
        if len(token) > MAX_TOKEN_CHARS:
            raise ValueError("too long")
        fields = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
        after = fields["a"]
        search = _Search(
            int(fields["b"]),
            int(fields["e"]),
            str(fields["d"]),
            None if after is None else (int(after[0]), int(after[1]), int(after[2])),
        )
        if fields["v"] != TOKEN_VERSION:
            raise ValueError("version")
        for bound in (search.begin_ms, search.end_ms):
            if not 0 <= bound <= MAX_TIMESTAMP_MS:
                raise ValueError("not a timestamp")
    except (ValueError, KeyError, TypeError, IndexError, OverflowError) as exc:
        raise InvalidPageToken("the page token is malformed") from exc
    if search.digest != digest:
        raise InvalidPageToken("the page token belongs to another topic or key")
    return search
