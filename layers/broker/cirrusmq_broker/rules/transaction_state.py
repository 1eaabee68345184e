"""Transactions: the model and the pure rules (no I/O), as group_state.py is for groups.

A transaction of a producer group holds half messages (stored under ``half/`` in S3, never
under ``topics/``) for ONE target topic until a verdict ends it: COMMIT appends them to the
topic, ROLLBACK discards them. States::

    OPEN ──commit──▶ COMMITTING ──appended──▶ COMMITTED
      └──rollback / max checks / retention──▶ ROLLED_BACK

COMMITTING is entered before anything is appended, so nothing can roll back a transaction
whose messages may already be visible; a crashed commit is resumed (by a commit again or by
the checker) and is idempotent.
"""

from __future__ import annotations

import enum
import hashlib
import re
import zlib
from dataclasses import dataclass, field

from ..errors import InvalidRequest

DEFAULT_IMMUNITY_SECONDS = 6
"""RocketMQ's transaction check immunity: no check before a transaction is this old."""
DEFAULT_INTERVAL_SECONDS = 30
DEFAULT_MAX_CHECKS = 15
MAX_IMMUNITY_SECONDS = 12 * 3600
MAX_INTERVAL_SECONDS = 12 * 3600
MAX_MAX_CHECKS = 100
MAX_PARTS = 50
"""Sends one transaction may hold (the transaction item stays far under 400 KB)."""
CLAIM_SECONDS = 15
"""A check handed to one producer is not handed to another one for this long."""
ENDED_KEEP_SECONDS = 7 * 24 * 3600
"""An ended transaction (with its verdict and reason) is kept this long, then expires."""
REGISTRATION_KEEP_SECONDS = 30 * 24 * 3600
"""A producer registration expires this long after its producer last polled for checks
(refreshed at most once a day)."""
DUE_SHARDS = 4
"""Open transactions spread over this many partitions of the due-time index."""
ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


class TxnState(enum.StrEnum):
    OPEN = "OPEN"
    COMMITTING = "COMMITTING"
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"


class Resolution(enum.StrEnum):
    """A verdict: COMMIT, ROLLBACK, or (answering a check only) UNKNOWN."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class CheckTimings:
    """When the checker asks about an undecided transaction."""

    immunity_seconds: int = DEFAULT_IMMUNITY_SECONDS
    interval_seconds: int = DEFAULT_INTERVAL_SECONDS
    max_checks: int = DEFAULT_MAX_CHECKS

    def __post_init__(self) -> None:
        if not 0 <= self.immunity_seconds <= MAX_IMMUNITY_SECONDS:
            raise InvalidRequest(f"check_immunity_seconds must be 0-{MAX_IMMUNITY_SECONDS}")
        if not 1 <= self.interval_seconds <= MAX_INTERVAL_SECONDS:
            raise InvalidRequest(f"check_interval_seconds must be 1-{MAX_INTERVAL_SECONDS}")
        if not 1 <= self.max_checks <= MAX_MAX_CHECKS:
            raise InvalidRequest(f"max_checks must be 1-{MAX_MAX_CHECKS}")


@dataclass(frozen=True)
class HalfObject:
    """One half object: the messages of one send routed to one queue of the target topic."""

    key: str
    queue: int
    count: int
    size_bytes: int
    min_timestamp: int
    max_timestamp: int


@dataclass(frozen=True)
class HalfPart:
    """What one send of a transaction stored."""

    part: int
    digest: str
    """Fingerprint of the send's messages: a retry has the same one."""
    objects: tuple[HalfObject, ...]
    message_ids: tuple[str, ...]
    queues: tuple[int, ...]
    """The queue of each message, in send order."""


@dataclass(frozen=True)
class Transaction:
    producer_group: str
    transaction_id: str
    transactional_id: str
    """The registered producer that opened it."""
    epoch: int
    topic: str
    state: TxnState
    created_at: int
    timings: CheckTimings
    parts: tuple[HalfPart, ...] = ()
    checks: int = 0
    """Check requests published so far."""
    next_check_at: int | None = None
    commit_started_at: int | None = None
    ended_at: int | None = None
    end_reason: str | None = None
    ended_by: str | None = None
    """``producer``, ``check``, ``operator`` or ``checker``."""
    claim_until: int = 0
    """A producer holds the pending check until then."""
    claimed_by: str | None = None
    """The transactional id of the producer the pending check was handed to."""
    check_failures: int = 0
    """Checker passes in a row that failed on this transaction (reset by a good pass)."""
    last_error: str | None = None
    """The last such failure, for operators."""
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def message_count(self) -> int:
        return sum(len(p.message_ids) for p in self.parts)

    @property
    def objects(self) -> list[HalfObject]:
        """Every half object, in send order."""
        return [o for p in sorted(self.parts, key=lambda p: p.part) for o in p.objects]

    @property
    def ended(self) -> bool:
        return self.state in (TxnState.COMMITTED, TxnState.ROLLED_BACK)


def check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidRequest(f"invalid {what} {str(value)[:140]!r}: 1-128 of A-Z a-z 0-9 _ . : -")
    return value


def check_part(part: int) -> int:
    if not 0 <= part < MAX_PARTS:
        from ..errors import TooManyTransactionParts

        raise TooManyTransactionParts(f"part must be 0-{MAX_PARTS - 1} (sends per transaction)")
    return part


def due_shard(producer_group: str, transaction_id: str) -> str:
    """The due-index partition of a transaction (spreads writes, read by the checker)."""
    return f"due#{zlib.crc32(f'{producer_group}#{transaction_id}'.encode()) % DUE_SHARDS}"


def route(transaction_id: str, groups: list[str | None], queues: int) -> list[int]:
    """The queue of each message: by its message group, else by the transaction id (every
    ungrouped message of a transaction goes to one queue, in order)."""
    ungrouped = zlib.crc32(transaction_id.encode()) % queues
    return [zlib.crc32(g.encode()) % queues if g is not None else ungrouped for g in groups]


def half_key(producer_group: str, transaction_id: str, part: int, digest: str, queue: int) -> str:
    """Deterministic: a retried send writes (and finds) the same object."""
    return f"half/{producer_group}/{transaction_id}/{part}-{digest[:16]}-q{queue}.parquet"


def committed_name(producer_group: str, transaction_id: str) -> str:
    """The object name (under the topic's queue/day) of a committed transaction's batch:
    a hash of (producer group, NUL, transaction id), so two transactions never share one."""
    return f"txn-{_txn_hash(producer_group, transaction_id)[:40]}"


def commit_stamp_id(producer_group: str, transaction_id: str) -> str:
    """The producer id of the commit's appends (sequence = chunk number): a re-run is
    AlreadyRecorded. ``~`` is not a character a user's producer id may have."""
    return f"~txn.{producer_group}.{transaction_id}"


def commit_digest(producer_group: str, transaction_id: str) -> str:
    """The digest the commit records with its stamp: an AlreadyRecorded append is the
    transaction's own only when the record carries it."""
    return f"txn:{_txn_hash(producer_group, transaction_id)}"


def _txn_hash(producer_group: str, transaction_id: str) -> str:
    return hashlib.sha256(f"{producer_group}\0{transaction_id}".encode()).hexdigest()


MAX_QUEUES_PER_COMMIT_APPEND = 49
"""An append writes 2 items per queue + the producer record (TransactWriteItems: <= 100):
a commit touching more queues appends in chunks of this many queues."""
MAX_RECORDED_BYTES = 256 * 1024
"""What a transaction's item may record of its parts (message ids, queues, object keys):
the item stays under DynamoDB's 400 KB. A send past it is TransactionTooLarge."""


def part_record_size(part_json: str) -> int:
    """The bytes a part adds to the transaction item (its attribute name and JSON)."""
    return len(part_json.encode()) + 8


def failure_backoff_seconds(failures: int, interval_seconds: int) -> int:
    """When the checker retries a transaction whose check failed ``failures`` times in a
    row: 1, 2, 4... seconds, at most max(60, interval) (it never spins)."""
    return min(2 ** min(failures, 20), max(60, interval_seconds))


class CheckAction(enum.Enum):
    ASK = "ask"
    RESUME_COMMIT = "resume_commit"
    ROLLBACK = "rollback"
    NONE = "none"


@dataclass(frozen=True)
class CheckStep:
    action: CheckAction
    reason: str | None = None


def check_step(txn: Transaction, now: int, retention_hours: int | None) -> CheckStep:
    """What the checker does with a transaction found due.

    ``retention_hours`` is None when the target topic no longer exists.
    """
    if txn.state is TxnState.COMMITTING:
        return CheckStep(CheckAction.RESUME_COMMIT)
    if txn.state is not TxnState.OPEN:
        return CheckStep(CheckAction.NONE)
    if txn.next_check_at is not None and txn.next_check_at > now:
        return CheckStep(CheckAction.NONE)
    if retention_hours is None:
        return CheckStep(CheckAction.ROLLBACK, f"the topic {txn.topic} was deleted")
    if now - txn.created_at >= retention_hours * 3600 * 1000:
        return CheckStep(
            CheckAction.ROLLBACK,
            f"undecided for longer than the topic's retention ({retention_hours} h)",
        )
    if txn.checks >= txn.timings.max_checks:
        return CheckStep(CheckAction.ROLLBACK, f"no verdict after {txn.checks} checks")
    return CheckStep(CheckAction.ASK)
