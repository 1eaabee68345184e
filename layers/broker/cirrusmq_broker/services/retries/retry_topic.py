"""The group's retry topic ``retry.<group>.<topic>`` and dead-letter topic ``dlq.<group>``:
moving messages there, and serving the retry topic's due messages within a receive.

A move appends copies of the messages (their attempt and origin in the system properties) to
the retry topic's queue of the backoff level they reached, or to the DLQ. A group with a
dead-letter destination (a user topic, e.g. the SQS dead-letter queue a RedrivePolicy names)
has its dead letters appended there instead, as messages of that topic, by the same fenced
move: no later step forwards them. The retry topic has one queue per backoff level; a batch
of level ``n`` becomes visible ``n``'s backoff after it was stored, so a level queue is
served only up to its first batch not yet visible (the index is immutable, so that bound is
cached until it passes); one more queue takes the group's dead letters a redrive sends back
(services/dead_letters.py), visible at once. A receive of the user topic asks
:meth:`RetryTopic.due` what it may serve, serves that part with its own pass and hands the
deliveries back through :meth:`RetryTopic.served`, which shows them as their originals.
:meth:`RetryTopic.receivable_at` tells a receive that served nothing when something of the
retry topic becomes receivable (a batch in its backoff, a lease of it), as this container
last read or moved it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...errors import TopicNotFound
from ...model import NewMessage, ProducerStamp, ReceivedMessage, StoredMessage, Topic
from ...rules.group_state import GroupQueueState
from ...rules.retries import (
    DLQ_QUEUES,
    DLQ_RETENTION_HOURS,
    MIN_RETRY_RETENTION_HOURS,
    RETRY_TOPIC_QUEUES,
    Target,
    as_original,
    dead_letter_copy,
    dlq_topic,
    first_queue,
    is_internal,
    moved_copy,
    redrive_queue,
    retry_origin,
    retry_topic,
    visible_at,
)
from ...storage.group_views import GroupView, GroupViewReader
from ...storage.log_index import LogIndex
from ..moves import MoveAppender
from ..topic_catalog import TopicCatalog
from ..trace import record_moved
from .settings import RetrySettings

RETRY_CHECK_SECONDS = 5
"""An idle consumer reads its retry topic's queues at most this often per container."""


@dataclass
class DueRetries:
    """What of a group's retry topic a receive may serve now."""

    key: tuple[str, str]
    """(group, user topic)."""
    topic: Topic
    """The retry topic."""
    view: GroupView
    """The group's view of it, each queue's head cut at the end of what is visible now."""
    next_due: int
    """When (ms) the retry topic is worth reading again if nothing is served now."""
    receivable_at: int | None = None
    """When (ms) something not receivable now becomes so (a batch's backoff passes, a lease
    ends); None if nothing is known."""


class RetryTopic:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        moves: MoveAppender,
        index: LogIndex,
        views: GroupViewReader,
        settings: RetrySettings,
        clock: Callable[[], int],
    ) -> None:
        self._settings = settings
        self._topics = topics
        self._moves = moves
        self._index = index
        self._views = views
        self._clock = clock
        self._next_check: dict[tuple[str, str], int] = {}
        """(group, topic) → when (ms) its retry topic is worth reading again."""
        self._receivable: dict[tuple[str, str], int] = {}
        """(group, topic) → when (ms) something of its retry topic becomes receivable."""
        self._visible: dict[str, tuple[int, int]] = {}
        """Retry stream → (offset X, T): the batch at X becomes visible at T (immutable)."""
        self._lock = threading.Lock()

    # ================================================================ moving
    def move(
        self,
        group: str,
        topic: Topic,
        target: Target,
        messages: list[StoredMessage],
        attempt: int | list[int],
        producer: str,
        *,
        sequence: int | None = None,
        digest: str | None = None,
        fence: list[dict] | None = None,
    ) -> str | None:
        """Append copies of ``messages`` (delivered ``attempt`` times, one number for all or
        one each) to ``target``: a level of the retry topic, or the DLQ. The append is
        stamped (``producer``, ``sequence``: the target number if None) and carries the
        transaction items ``fence``. None if appended now; else the digest recorded by an
        earlier append under the same stamp (AlreadyRecorded)."""
        attempts = attempt if isinstance(attempt, list) else [attempt] * len(messages)
        elsewhere = self.dead_letter_topic(group) if target.dead else None
        copies: list[NewMessage]
        if elsewhere is not None:
            destination, properties = elsewhere
            queue = first_queue(messages[0]) % destination.queues
            copies = [
                dead_letter_copy(m, a, target, properties)
                for m, a in zip(messages, attempts, strict=True)
            ]
        else:
            destination, queue = self._destination(group, topic, target)
            copies = [moved_copy(m, a, target) for m, a in zip(messages, attempts, strict=True)]
        stamp = ProducerStamp(producer, target.number if sequence is None else sequence)
        recorded = self._moves.append(destination, queue, copies, stamp, digest, fence=fence)
        record_moved(
            self._topics, group, topic, messages, attempts,
            target_topic=destination.name, dead=target.dead, reason=target.reason,
        )  # fmt: skip
        if not target.dead:  # this container looks at the retry topic when it is due
            key = (group, retry_origin(group, topic.name) or topic.name)
            due = visible_at(self._clock(), target.number)
            with self._lock:
                self._next_check[key] = min(self._next_check.get(key, due), due)
                self._receivable[key] = min(self._receivable.get(key, due), due)
        return recorded

    def dead_letter_topic(self, group: str) -> tuple[Topic, dict[str, str]] | None:
        """The group's dead-letter destination and the properties its letters get there;
        None if it has none or its topic is gone (its letters go to ``dlq.<group>``).
        Queue choice: a letter goes to its first queue's number (modulo), so letters of one
        message group stay in one queue of a destination with as many queues."""
        destination = self._settings.dead_letter_destination(group)
        if destination is None:
            return None
        topic = self._moves.existing(destination.topic)
        if topic is None or is_internal(topic.name):
            return None
        return topic, destination.properties

    def _destination(self, group: str, topic: Topic, target: Target) -> tuple[Topic, int]:
        if target.dead:
            return self._moves.ensure(dlq_topic(group), DLQ_QUEUES, DLQ_RETENTION_HOURS), 0
        return self._retry_topic(group, topic), target.number

    def _retry_topic(self, group: str, topic: Topic) -> Topic:
        """``group``'s retry topic for ``topic`` (a user topic or that retry topic), to
        append to: it keeps what is appended now as long as the user topic keeps its
        messages now (at least ``MIN_RETRY_RETENTION_HOURS``). The retry topic's item keeps
        the retention of the topic at its first retry, and the topic's may have grown since
        (a change, or the topic deleted and made again): a retry or a redriven dead letter
        would expire before the topic's own messages."""
        origin = retry_origin(group, topic.name)
        if origin is not None:  # a move from the retry topic itself: its user topic's now
            with contextlib.suppress(TopicNotFound):  # gone: the retry topic's own
                topic = self._topics.active(origin)
        name = retry_topic(group, origin or topic.name)
        retention = max(topic.retention_hours, MIN_RETRY_RETENTION_HOURS)
        retry = self._moves.ensure(name, RETRY_TOPIC_QUEUES, retention)
        if retry.retention_hours < retention:
            retry = replace(retry, retention_hours=retention)
        return retry

    def redrive_destination(self, group: str, topic: Topic) -> tuple[Topic, int]:
        """Where ``group``'s dead letters of the user topic ``topic`` go back to: the
        group's retry topic (no other group reads it) and its redrive queue."""
        retry = self._retry_topic(group, topic)
        return retry, redrive_queue(retry.queues)

    def redriven(self, group: str, topic: str, queue: int) -> None:
        """Dead letters of ``topic`` were appended to ``group``'s retry topic's ``queue``:
        this container reads the retry topic when they are due."""
        due = visible_at(self._clock(), queue)
        with self._lock:
            key = (group, topic)
            self._next_check[key] = min(self._next_check.get(key, due), due)
            self._receivable[key] = min(self._receivable.get(key, due), due)

    @property
    def topics(self) -> TopicCatalog:
        """The user topics' catalog (message trace asks it whether a topic is traced)."""
        return self._topics

    def resolve(self, name: str) -> Topic:
        """A topic a receipt handle names: a user topic, or an internal one (retry, DLQ)."""
        if is_internal(name):
            topic = self._moves.existing(name)
            if topic is None:
                raise TopicNotFound(f"topic {name!r} does not exist")
            return topic
        return self._topics.active(name)

    # ================================================================ serving
    def due(self, group: str, topic: Topic, *, fresh: bool = False) -> DueRetries | None:
        """What of ``group``'s retry topic for ``topic`` a receive may serve now; None when
        it is not worth reading (nothing due, as this container knows, or no retry topic).
        ``fresh``: read it even if this container knows of nothing due (another container
        may have appended since)."""
        key = (group, topic.name)
        now = self._clock()
        with self._lock:
            if not fresh and now < self._next_check.get(key, 0):
                return None
        retry = self._moves.existing(retry_topic(group, topic.name))
        if retry is None:
            self._later(key, now + RETRY_CHECK_SECONDS * 1000, None)
            return None
        view = self._views.read(group, retry.name, retry.queues)
        coming: list[int] = []  # batches in their backoff, leases
        for q, head in list(view.heads.items()):
            state = view.states[q]
            end, due = self._visible_end(retry, q, state, head.next_offset, now)
            view.heads[q] = replace(head, next_offset=end)
            if due is not None:
                coming.append(due)
            if state.earliest_deadline is not None:
                coming.append(state.earliest_deadline)
        next_due = min([now + RETRY_CHECK_SECONDS * 1000, *coming])
        ahead = [t for t in coming if t > now]  # a passed deadline: the pass's expiry moves it
        return DueRetries(key, retry, view, next_due, min(ahead, default=None))

    def receivable_at(self, group: str, topic: str) -> int | None:
        """When (ms) something of ``group``'s retry topic for ``topic`` becomes receivable,
        as this container last read it (or moved a message there); None if nothing is
        known. A receive that served nothing passes it on to its consumer."""
        with self._lock:
            return self._receivable.get((group, topic))

    def served(
        self, due: DueRetries, received: list[ReceivedMessage], budget: int
    ) -> list[ReceivedMessage]:
        """The deliveries a receive made of ``due`` (asked for ``budget``), as the consumer
        sees them; notes when the retry topic is worth reading again."""
        next_due, receivable = due.next_due, due.receivable_at
        for r in received:  # their leases may expire: look again then
            next_due = min(next_due, r.invisible_until)
            receivable = min(receivable or r.invisible_until, r.invisible_until)
        self._later(due.key, 0 if len(received) >= budget else next_due, receivable)
        return [self.present(r) for r in received]

    def _later(self, key: tuple[str, str], when: int, receivable: int | None) -> None:
        with self._lock:
            if len(self._next_check) > 10_000:
                self._next_check.clear()
                self._receivable.clear()
            self._next_check[key] = when
            if receivable is None:
                self._receivable.pop(key, None)
            else:
                self._receivable[key] = receivable

    def _visible_end(
        self, retry: Topic, queue: int, state: GroupQueueState, head: int, now: int
    ) -> tuple[int, int | None]:
        """(offset before which the level queue is visible now, when the next batch is due)."""
        if head <= state.cursor:
            return head, None
        stream = f"{retry.name}#{queue}"
        with self._lock:
            cached = self._visible.get(stream)
        if cached is not None and cached[0] >= state.cursor and now < cached[1]:
            return cached[0], cached[1]  # the index is immutable: no need to read it again
        page = self._index.read_from(
            retry.name, queue, state.cursor_base, 100, now_s=now // 1000, end=head
        )
        end = max(page.floor, state.cursor)
        for entry in page.entries:
            due = visible_at(entry.stored_timestamp, queue)
            if due > now:
                with self._lock:
                    if len(self._visible) > 10_000:
                        self._visible.clear()
                    self._visible[stream] = (entry.base_offset, due)
                return max(entry.base_offset, state.cursor), due
            end = entry.next_offset
        return min(max(end, state.cursor), head), None

    @staticmethod
    def present(received: ReceivedMessage) -> ReceivedMessage:
        """A retry delivery as the consumer sees it: original place, attempts so far."""
        message = received.message
        return replace(
            received,
            message=as_original(message),
            delivery_attempt=message.system.reconsume_count + received.delivery_attempt,
        )
