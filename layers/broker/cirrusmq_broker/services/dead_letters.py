"""Dead letters of a consumer group (``dlq.<group>``, one queue): list, redrive, purge.

Redrive sends dead letters back to their original topic and queue (a new append there: the
same message id, reconsume count reset to 0, so the group gets its full attempts again). It
is resumable and idempotent: it walks the DLQ one index batch at a time from a cursor item
(one per filter); each batch's messages are appended per original (topic, queue) with the
stamp ``~redrive.<group>.<dlq offset of the batch>``/<n>, then the cursor advances
conditionally. A crash before the cursor moved re-runs the batch: its appends are
AlreadyRecorded, nothing is stored twice. Redrive by message ids moves each message on its
own (stamp per DLQ offset) and leaves the cursors alone. Purge raises a floor below which
nothing is listed or redriven; the objects expire with the DLQ's retention (14 days).

Every way of redriving sends a dead letter back at most once: a redrive by ids skips a
letter below a cursor that covers it (``*`` or its origin topic) or whose batch's redrive
was recorded (a crash before the cursor moved); a cursor redrive leaves out the letters
redriven by id (their records, one batched read per DLQ batch). The records are kept as
long as the DLQ keeps its letters, and a listing marks the letters already redriven.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import GroupNotFound, InvalidRequest, TopicNotFound
from ..model import IndexEntry, ProducerStamp, StoredMessage
from ..retry_rules import DLQ_RETENTION_HOURS, dlq_topic, redriven_copy
from ..storage.group_configs import DeadLetterMarks, GroupConfigStore
from ..storage.log_index import LogIndex
from ..storage.move_records import MoveRecords
from ..storage.queue_heads import QueueHeads
from ..validation import check_group_name, check_message_id, check_topic_name
from .batch_reader import BatchReader
from .moves import MoveAppender
from .topic_catalog import TopicCatalog

PREVIEW_BYTES = 256
MAX_LIST = 1000
MAX_REDRIVE_PER_CALL = 1000
MAX_REDRIVE_IDS = 100
MAX_OFFSET = 2**63 - 1
MAX_LIST_SCAN = 10_000
"""Dead letters one listing examines at most (a topic filter skips the others): a page may
hold fewer than ``limit`` and still have a ``next_start``."""


@dataclass(frozen=True)
class DeadLetter:
    offset: int
    """Offset in the group's dead-letter topic (``start`` of a listing)."""
    message: StoredMessage
    redriven: bool = False
    """Sent back to its topic by a redrive already (a redrive skips it)."""


@dataclass(frozen=True)
class DeadLetterPage:
    dead_letters: list[DeadLetter]
    next_start: int | None
    """Where the next page starts (None: the end of the DLQ for now)."""


@dataclass(frozen=True)
class RedriveResult:
    redriven: int
    """Messages appended to their topics by this call (not those redriven before)."""
    skipped: int
    """Messages whose topic no longer exists (they stay in the DLQ)."""
    next_offset: int
    """The DLQ offset redrive goes on from."""
    done: bool
    """Nothing left to redrive (for now)."""


class DeadLetterService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        moves: MoveAppender,
        index: LogIndex,
        heads: QueueHeads,
        reader: BatchReader,
        configs: GroupConfigStore,
        clock: Callable[[], int],
        records: MoveRecords | None = None,
    ) -> None:
        self._records = records
        self._topics = topics
        self._moves = moves
        self._index = index
        self._heads = heads
        self._reader = reader
        self._configs = configs
        self._clock = clock

    def list(
        self, group: str, *, topic: str | None = None, limit: int = 100, start: int = 0
    ) -> DeadLetterPage:
        check_group_name(group)
        if topic is not None:
            check_topic_name(topic)
        if not 1 <= limit <= MAX_LIST:
            raise InvalidRequest(f"limit must be 1-{MAX_LIST}")
        if not 0 <= start <= MAX_OFFSET:
            raise InvalidRequest(f"start must be 0-{MAX_OFFSET}")
        name = dlq_topic(group)
        if self._no_dead_letters(group):
            return DeadLetterPage([], None)
        marks = self._configs.dead_letter_marks(group)
        start = max(start, marks.floor)
        found: list[DeadLetter] = []
        head = self._heads.get(name, 0).next_offset
        scanned = 0
        for _, batch in self._batches(name, start, head):
            for message in batch:
                if message.offset < start:
                    continue
                if len(found) >= limit or scanned >= MAX_LIST_SCAN:
                    return DeadLetterPage(self._marked(group, marks, found), message.offset)
                scanned += 1
                if topic is None or message.system.origin_topic == topic:
                    found.append(DeadLetter(message.offset, message))
        return DeadLetterPage(self._marked(group, marks, found), None)

    def _marked(
        self, group: str, marks: DeadLetterMarks, found: list[DeadLetter]
    ) -> list[DeadLetter]:
        """The letters with ``redriven`` set: below a cursor covering them, or by id."""
        by_id = self._redriven_by_id(group, [d.message for d in found])
        return [
            DeadLetter(d.offset, d.message, _below_cursor(marks, d.message) or d.offset in by_id)
            for d in found
        ]

    def _redriven_by_id(self, group: str, messages: list[StoredMessage]) -> set[int]:
        """DLQ offsets of ``messages`` that a redrive by id sent back already."""
        if self._records is None:
            return set()
        stamps = {_id_stamp(group, m): m.offset for m in messages if m.system.origin_topic}
        return {stamps[s] for s in self._records.recorded(list(stamps))}

    def redrive(
        self,
        group: str,
        *,
        topic: str | None = None,
        message_ids: list[str] | None = None,
        max_messages: int = 100,
        start: int = 0,
    ) -> RedriveResult:
        """Redrive up to about ``max_messages`` (whole DLQ batches) back to their topics.

        One call examines at most ``MAX_LIST_SCAN`` dead letters (a filter or ids cannot make
        it walk the whole DLQ): ``done`` False then; a redrive by ids goes on from
        ``start`` = the answer's ``next_offset``, a cursor redrive from its cursor."""
        check_group_name(group)
        if topic is not None:
            check_topic_name(topic)
        if not 1 <= max_messages <= MAX_REDRIVE_PER_CALL:
            raise InvalidRequest(f"max_messages must be 1-{MAX_REDRIVE_PER_CALL}")
        if isinstance(start, bool) or not 0 <= start <= MAX_OFFSET:
            raise InvalidRequest(f"start must be 0-{MAX_OFFSET}")
        if message_ids is not None:
            if not 1 <= len(message_ids) <= MAX_REDRIVE_IDS:
                raise InvalidRequest(f"message_ids takes 1-{MAX_REDRIVE_IDS} ids")
            for message_id in message_ids:
                check_message_id(message_id)
        name = dlq_topic(group)
        if self._no_dead_letters(group):
            return RedriveResult(0, 0, 0, True)
        marks = self._configs.dead_letter_marks(group)
        head = self._heads.get(name, 0).next_offset
        if message_ids is not None:
            return self._redrive_ids(group, name, set(message_ids), marks, head, start)
        key = topic or "*"
        cursor = marks.cursor(key)
        redriven = skipped = examined = 0
        for entry, batch in self._batches(name, cursor, head):
            if redriven + skipped >= max_messages or examined >= MAX_LIST_SCAN:
                return RedriveResult(redriven, skipped, cursor, False)
            examined += len(batch)
            chosen = [
                m
                for m in batch
                if m.offset >= cursor and (topic is None or m.system.origin_topic == topic)
            ]
            by_id = self._redriven_by_id(group, chosen)
            chosen = [m for m in chosen if m.offset not in by_id]
            moved, lost = self._send_back(group, f"{entry.base_offset}", chosen)
            if not self._configs.advance_cursor(group, key, cursor, entry.next_offset):
                raise InvalidRequest("another redrive of this group is running; try again")
            redriven, skipped, cursor = redriven + moved, skipped + lost, entry.next_offset
        return RedriveResult(redriven, skipped, max(cursor, head), True)

    def purge(self, group: str, *, before: int | None = None) -> int:
        """Dead letters below ``before`` (default: all so far) are no longer listed or
        redriven; returns the new floor."""
        check_group_name(group)
        name = dlq_topic(group)
        if self._no_dead_letters(group):
            return 0
        head = self._heads.get(name, 0).next_offset
        if before is not None and not 0 <= before <= MAX_OFFSET:
            raise InvalidRequest(f"before must be 0-{MAX_OFFSET}")
        floor = head if before is None else min(before, head)
        self._configs.raise_floor(group, floor)
        return max(floor, self._configs.dead_letter_marks(group).floor)

    # ---------------------------------------------------------------- internals
    def _no_dead_letters(self, group: str) -> bool:
        """True if the group has no dead-letter topic; GroupNotFound if it has no items."""
        if self._moves.existing(dlq_topic(group)) is not None:
            return False
        if not self._configs.group_exists(group):
            raise GroupNotFound(f"consumer group {group!r} does not exist")
        return True

    def _batches(self, name: str, start: int, head: int):  # noqa: ANN202 - generator
        """(entry, messages) of the DLQ from the batch holding ``start`` up to ``head``."""
        now_s = self._clock() // 1000
        first = self._index.entry_at(name, 0, start) if start > 0 else None
        base = first.base_offset if first else start
        while base < head:
            page = self._index.retained_from(name, 0, base, 50, now_s=now_s, end=head)
            if not page.entries:  # nothing retained in [base, head)
                return
            for entry in page.entries:
                yield entry, self._reader.messages(entry)
            base = page.entries[-1].next_offset

    def _send_back(self, group: str, step: str, messages: list[StoredMessage]) -> tuple[int, int]:
        """Append ``messages`` to their original topics, one append per (topic, queue)."""
        by_origin: dict[tuple[str, int], list[StoredMessage]] = {}
        for m in messages:
            if m.system.origin_topic is None:
                continue
            by_origin.setdefault((m.system.origin_topic, m.system.origin_queue or 0), []).append(m)
        moved = lost = 0
        for (origin, queue), group_messages in sorted(by_origin.items()):
            try:
                topic = self._topics.active(origin)
                stamp = ProducerStamp(
                    f"~redrive.{group}.{step}.{origin}#{queue}", group_messages[0].offset
                )
                copies = [redriven_copy(m) for m in group_messages]
                if (
                    self._moves.append(
                        topic,
                        queue % topic.queues,
                        copies,
                        stamp,
                        record_keep_seconds=DLQ_RETENTION_HOURS * 3600,
                    )  # fmt: skip
                    is None
                ):
                    moved += len(group_messages)  # else redriven before: not stored again
            except TopicNotFound:
                lost += len(group_messages)
        return moved, lost

    def _redrive_ids(
        self,
        group: str,
        name: str,
        wanted: set[str],
        marks: DeadLetterMarks,
        head: int,
        start: int = 0,
    ) -> RedriveResult:
        redriven = skipped = examined = 0
        start = max(start, marks.floor)
        for entry, batch in self._batches(name, start, head):
            if examined >= MAX_LIST_SCAN:
                return RedriveResult(redriven, skipped, entry.base_offset, False)
            examined += len(batch)
            for m in batch:
                if m.offset < start or m.message_id not in wanted:
                    continue
                if _below_cursor(marks, m) or self._batch_redriven(group, entry, batch, m):
                    continue  # a cursor redrive sent it back already
                moved, lost = self._send_back(group, f"id{m.offset}", [m])
                redriven, skipped = redriven + moved, skipped + lost
        return RedriveResult(redriven, skipped, head, True)

    def _batch_redriven(
        self, group: str, entry: IndexEntry, batch: list[StoredMessage], message: StoredMessage
    ) -> bool:
        """Whether the cursor redrive of ``message``'s DLQ batch recorded its append (it
        may have crashed before its cursor moved)."""
        if self._records is None or message.system.origin_topic is None:
            return False
        origin = (message.system.origin_topic, message.system.origin_queue or 0)
        first = next(
            m.offset for m in batch if (m.system.origin_topic, m.system.origin_queue or 0) == origin
        )
        producer = f"~redrive.{group}.{entry.base_offset}.{origin[0]}#{origin[1]}"
        return self._records.any_recorded([ProducerStamp(producer, first)])


def _below_cursor(marks: DeadLetterMarks, message: StoredMessage) -> bool:
    """Whether a cursor redrive covering ``message`` (all, or its origin topic) passed it."""
    origin = message.system.origin_topic
    cursors = marks.cursors or {}
    return message.offset < max(cursors.get("*", 0), cursors.get(origin, 0) if origin else 0)


def _id_stamp(group: str, m: StoredMessage) -> ProducerStamp:
    """The stamp of a redrive by id of ``m`` (see ``_send_back``)."""
    return ProducerStamp(
        f"~redrive.{group}.id{m.offset}.{m.system.origin_topic}#{m.system.origin_queue or 0}",
        m.offset,
    )
