"""Dead letters of a consumer group (``dlq.<group>``, one queue): list, redrive, purge.

A dead letter belongs to its group, and a redrive sends it back to that group only, as
RocketMQ's per-group ``%DLQ%<group>`` is resent to its consumer group: the letters are
appended to the group's retry topic (``retry.<group>.<topic>``, which no other group reads)
in its redrive queue, due at once, each with its id and first place (the group sees it at
its topic, queue and offset), reconsume count reset to 0, so the group gets its full
attempts again. Other groups of the topic, which settled the message on their own, get
nothing. On a FIFO topic too: the letter left its message group's order when it died (the
group's later messages went on), so it comes back at once, not held behind them.

Every way of redriving (all, by topic, by message ids) sends a letter back **exactly once**,
whatever the order of the calls, the crashes and the re-runs in between: each append of
letters carries, in its own DynamoDB transaction, the claim of those letters on their DLQ
batch's claims item (conditional on the claims version it read, see
:mod:`~cirrusmq_broker.storage.redrive_claims`) and a check that no purge passed them. A
re-run, a concurrent redrive or a redrive by id of a letter a crashed redrive sent reads the
claims and leaves the letter out; a claim lost to a concurrent one is re-read and retried.
A cursor redrive walks the DLQ one index batch at a time from a cursor item (one per filter)
and moves the cursor conditionally once a batch's letters are sent: the cursor is progress,
the claims are the fence. Purge raises a floor below which nothing is listed or redriven;
the objects expire with the DLQ's retention (14 days), the claims with them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import Busy, GroupNotFound, InvalidRequest, TopicNotFound
from ..message_ids import spellings
from ..model import IndexEntry, ProducerStamp, StoredMessage
from ..rules.retries import DLQ_RETENTION_HOURS, dlq_topic, redriven_copy
from ..storage.appends import ExtraItemRejected
from ..storage.group_configs import DeadLetterMarks, GroupConfigStore
from ..storage.legacy_redrives import LetterOrigin
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHeads
from ..storage.redrive_claims import RedriveClaims, RedriveClaimStore
from ..validation import check_group_name, check_message_id, check_topic_name
from .batch_reader import BatchReader
from .moves import MoveAppender
from .topic_catalog import TopicCatalog
from .trace import record_placed

if TYPE_CHECKING:  # a type only: services/retries and services/delivery import each other
    from .retries.retry_topic import RetryTopic

PREVIEW_BYTES = 256
MAX_LIST = 1000
MAX_REDRIVE_PER_CALL = 1000
MAX_REDRIVE_IDS = 100
MAX_OFFSET = 2**63 - 1
MAX_LIST_SCAN = 10_000
"""Dead letters one listing examines at most (a topic filter skips the others): a page may
hold fewer than ``limit`` and still have a ``next_start``."""
MAX_CLAIM_ATTEMPTS = 20
"""Appends of one DLQ batch's letters refused by concurrent claims before Busy."""


@dataclass(frozen=True)
class DeadLetter:
    offset: int
    """Offset in the group's dead-letter topic (``start`` of a listing)."""
    message: StoredMessage
    redriven: bool = False
    """Sent back to its group by a redrive already (every redrive leaves it out)."""


@dataclass(frozen=True)
class DeadLetterPage:
    dead_letters: list[DeadLetter]
    next_start: int | None
    """Where the next page starts (None: the end of the DLQ for now)."""


@dataclass(frozen=True)
class RedriveResult:
    redriven: int
    """Messages sent back to the group by this call (not those redriven before)."""
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
        retry_topic: RetryTopic,
        index: LogIndex,
        heads: QueueHeads,
        reader: BatchReader,
        configs: GroupConfigStore,
        clock: Callable[[], int],
        claims: RedriveClaimStore,
    ) -> None:
        self._claims = claims
        self._topics = topics
        self._moves = moves
        self._retry_topic = retry_topic
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
        found: list[tuple[int, StoredMessage]] = []
        batches: dict[int, list[StoredMessage]] = {}
        head = self._heads.get(name, 0).next_offset
        scanned = 0
        for entry, batch in self._batches(name, start, head):
            batches[entry.base_offset] = batch
            for message in batch:
                if message.offset < start:
                    continue
                if len(found) >= limit or scanned >= MAX_LIST_SCAN:
                    return DeadLetterPage(self._marked(group, found, batches), message.offset)
                scanned += 1
                if topic is None or message.system.origin_topic == topic:
                    found.append((entry.base_offset, message))
        return DeadLetterPage(self._marked(group, found, batches), None)

    def _marked(
        self,
        group: str,
        found: list[tuple[int, StoredMessage]],
        batches: dict[int, list[StoredMessage]],
    ) -> list[DeadLetter]:
        """The letters (with their DLQ batch's base), ``redriven`` set for those a redrive
        sent back (one batched read of their batches' claims)."""
        wanted: dict[int, list[StoredMessage]] = {}
        for base, m in found:
            wanted.setdefault(base, []).append(m)
        origins = [o for base, ms in wanted.items() for o in _origins(base, ms, batches[base])]
        claims = self._claims.get_many(group, list(wanted), origins)
        return [
            DeadLetter(m.offset, m, m.offset in claims.get(base, RedriveClaims()).sent)
            for base, m in found
        ]

    def redrive(
        self,
        group: str,
        *,
        topic: str | None = None,
        message_ids: list[str] | None = None,
        max_messages: int = 100,
        start: int = 0,
    ) -> RedriveResult:
        """Redrive up to about ``max_messages`` (whole DLQ batches) back to the group;
        ``message_ids`` may name a ULID in UUID form, as SQS clients see it.

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
            wanted = {one for message_id in message_ids for one in spellings(message_id)}
            return self._redrive_ids(group, name, wanted, marks, head, start)
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
            moved, lost = self._send_back(group, entry, batch, chosen, marks.floor)
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

    def _send_back(
        self,
        group: str,
        entry: IndexEntry,
        batch: list[StoredMessage],
        letters: list[StoredMessage],
        floor: int,
    ) -> tuple[int, int]:
        """Send those of ``letters`` (of the DLQ batch ``entry``, read as ``batch``) that
        no redrive sent back yet to the group, one append per origin topic, each claiming
        its letters in its own transaction. Returns (sent back now, origin topic gone)."""
        letters = [m for m in letters if m.system.origin_topic is not None]
        if not letters:
            return 0, 0
        origins = _origins(entry.base_offset, letters, batch)
        claims = self._claims.get(group, entry.base_offset, origins)
        gone: set[str] = set()
        moved = lost = refused = 0
        while True:
            todo: dict[str, list[StoredMessage]] = {}
            for m in letters:
                origin = m.system.origin_topic or ""
                if m.offset not in claims.sent and m.offset >= floor and origin not in gone:
                    todo.setdefault(origin, []).append(m)
            if not todo:
                return moved, lost
            origin, chosen = min(todo.items())
            try:
                stored = self._append_claimed(group, entry, claims, origin, chosen)
            except TopicNotFound:  # stays in the DLQ, unclaimed: redrivable once it exists
                gone.add(origin)
                lost += len(chosen)
                continue
            except ExtraItemRejected as exc:  # another redrive or a purge came first
                refused += 1
                if refused >= MAX_CLAIM_ATTEMPTS:
                    raise Busy("concurrent redrives of this group; try again") from exc
                if 0 in exc.positions:
                    floor = self._configs.dead_letter_marks(group).floor
                claims = self._claims.get(group, entry.base_offset, origins)
                continue
            if stored:
                moved += len(chosen)
                claims = claims.after(m.offset for m in chosen)
            else:  # recorded before: the claims tell what is left
                refused += 1
                if refused >= MAX_CLAIM_ATTEMPTS:
                    raise Busy("concurrent redrives of this group; try again")
                claims = self._claims.get(group, entry.base_offset, origins)

    def _append_claimed(
        self,
        group: str,
        entry: IndexEntry,
        claims: RedriveClaims,
        origin: str,
        letters: list[StoredMessage],
    ) -> bool:
        """One append of ``letters`` (of the user topic ``origin``) to the group's retry
        topic, with their claim (on ``claims`` as read) and the check that no purge passed
        them; True if stored now."""
        topic = self._topics.active(origin)
        retry, queue = self._retry_topic.redrive_destination(group, topic)
        offsets = [m.offset for m in letters]
        expires_at = self._clock() // 1000 + DLQ_RETENTION_HOURS * 3600
        extra = [
            self._configs.not_purged_request(group, min(offsets)),
            self._claims.claim_request(
                group, entry.base_offset, claims, offsets, expires_at=expires_at
            ),
        ]
        outcome = self._moves.store(
            retry,
            queue,
            [redriven_copy(m) for m in letters],
            _stamp(group, entry, claims, offsets),
            record_keep_seconds=DLQ_RETENTION_HOURS * 3600,
            fence=extra,
        )
        self._retry_topic.redriven(group, origin, queue)
        stored = outcome.recorded_digest is None
        if stored:
            record_placed(
                topic, "redriven", letters, queue, outcome.base_offset,
                group=group, target_topic=retry.name,
            )  # fmt: skip
        return stored

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
            chosen = [m for m in batch if m.offset >= start and m.message_id in wanted]
            if chosen:
                moved, lost = self._send_back(group, entry, batch, chosen, marks.floor)
                redriven, skipped = redriven + moved, skipped + lost
        return RedriveResult(redriven, skipped, head, True)


def _stamp(
    group: str, entry: IndexEntry, claims: RedriveClaims, offsets: list[int]
) -> ProducerStamp:
    """The stamp of the append that claims ``offsets`` on top of ``claims``: one stamp
    always names the same letters (a digest of their offsets), so a re-run never reuses
    another append's object."""
    digest = hashlib.sha256(",".join(map(str, sorted(offsets))).encode()).hexdigest()[:16]
    return ProducerStamp(f"~redrive.{group}.b{entry.base_offset}.{digest}", claims.version + 1)


def _origins(
    dlq_base: int, wanted: list[StoredMessage], batch: list[StoredMessage]
) -> list[LetterOrigin]:
    """The letters of ``batch`` (the DLQ batch at ``dlq_base``) whose previous-release
    records may say one of ``wanted`` was sent back: each wanted letter, and the letters
    of its origin queue at or below it (where that release's cursor redrive of the batch
    may have started)."""
    highest: dict[tuple[str, int], int] = {}
    for m in wanted:
        if m.system.origin_topic is not None:
            origin = (m.system.origin_topic, m.system.origin_queue or 0)
            highest[origin] = max(m.offset, highest.get(origin, m.offset))
    return [
        LetterOrigin(dlq_base, m.offset, m.system.origin_topic, m.system.origin_queue or 0)
        for m in batch
        if m.system.origin_topic is not None
        and m.offset <= highest.get((m.system.origin_topic, m.system.origin_queue or 0), -1)
    ]
