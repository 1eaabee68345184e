"""The producer's outbox: sealed send requests waiting for the service, and pending acks.

A small storage contract, :class:`Outbox`, with two implementations:

- :class:`SqliteOutbox` — durable (WAL, ``busy_timeout``, claims made and marked in one
  ``BEGIN IMMEDIATE`` transaction). One client owns a file at a time: an exclusive lock on
  ``<path>.lock`` is held while it is open (the kernel releases it if the process dies).
- :class:`MemoryOutbox` — the same contract in memory (the producer's queue when it has no
  outbox file, and a fake for tests).

A stored batch is the exact JSON request, with its producer id and sequence, so that resending
it (even from another process) is idempotent: the service stores it once.
Batches that were never claimed (so never sent) may be merged into their topic's head
(:meth:`Outbox.followers`, :meth:`Outbox.merge`); a batch once claimed is resent unchanged.

A batch the service refused for good (a non-retriable 4xx: the topic does not exist, ...) is
*set aside* with its :class:`Refusal` (:meth:`Outbox.refuse`): it is no longer sent, but it is
kept — listed by :meth:`Outbox.refused`, put back in line by :meth:`Outbox.retry_refused` (in
its original place, with its original producer id and sequence: a refused request stored
nothing, so resending it as it was cannot duplicate anything) or deleted by
:meth:`Outbox.purge_refused`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from .errors import MQError, OutboxLockedError

try:  # POSIX only; elsewhere the single-owner rule is not enforced
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "MemoryOutbox",
    "Outbox",
    "OutboxBatch",
    "OutboxEntry",
    "OutboxStats",
    "PendingAck",
    "RefusedBatch",
    "Refusal",
    "SqliteOutbox",
]


@dataclass(frozen=True)
class OutboxBatch:
    """One sealed send request."""

    topic: str
    producer_id: str
    sequence: int
    message_ids: tuple[str, ...]
    """The client-made ids of its messages, in request order."""
    payload: bytes
    """The request body exactly as sent (JSON)."""


@dataclass(frozen=True)
class OutboxEntry:
    """A stored batch."""

    entry_id: int
    """Increasing in the order batches were appended."""
    batch: OutboxBatch
    attempts: int = 0
    """How many times it was claimed for sending."""


@dataclass(frozen=True)
class Refusal:
    """Why the service refused a batch for good."""

    code: str | None
    """The service's error code, e.g. ``TopicNotFound``."""
    message: str
    http_status: int | None
    refused_ms: int
    """When (ms since the epoch)."""

    @classmethod
    def of(cls, error: MQError, *, now_ms: int | None = None) -> Refusal:
        """The refusal ``error`` describes (now, unless ``now_ms`` is given)."""
        when = int(time.time() * 1000) if now_ms is None else now_ms
        return cls(error.code, error.message, error.http_status, when)


@dataclass(frozen=True)
class RefusedBatch:
    """A batch set aside after a refusal; see :meth:`Outbox.retry_refused`."""

    entry_id: int
    batch: OutboxBatch
    refusal: Refusal

    @property
    def topic(self) -> str:
        return self.batch.topic

    @property
    def message_ids(self) -> tuple[str, ...]:
        return self.batch.message_ids


@dataclass(frozen=True)
class PendingAck:
    """An ack that could not reach the service, kept until its receipt handle expires."""

    ack_id: int
    group: str
    receipt_handle: str
    expires_ms: int
    """When the handle stops being useful (the message's ``invisible_until``)."""


@dataclass(frozen=True)
class OutboxStats:
    batches: int
    """Batches waiting to be sent (the refused ones are not counted here)."""
    messages: int
    bytes: int
    acks: int
    refused_batches: int = 0
    """Batches set aside after a refusal."""
    refused_messages: int = 0


class Outbox(ABC):
    """Where sealed batches wait, in order per topic, until the service stored them."""

    durable: ClassVar[bool]
    """Whether entries survive the process."""

    @abstractmethod
    def append(self, batch: OutboxBatch) -> OutboxEntry:
        """Store ``batch`` behind every earlier one."""

    @abstractmethod
    def claim_heads(self, *, skip_topics: Collection[str] = ()) -> list[OutboxEntry]:
        """Claim the oldest batch of every topic whose oldest batch is not claimed already.

        Topics in ``skip_topics`` are left alone. At most one batch per topic is ever claimed,
        so batches of a topic are sent one at a time, in order.
        """

    @abstractmethod
    def followers(self, head: OutboxEntry, *, limit: int) -> list[OutboxEntry]:
        """Up to ``limit`` batches of ``head``'s topic stored right behind it, oldest first,
        stopping at the first one ever claimed."""

    @abstractmethod
    def merge(self, head: OutboxEntry, batch: OutboxBatch, absorbed: Sequence[int]) -> OutboxEntry:
        """In one step: ``head`` (claimed) now holds ``batch``, and the ``absorbed`` batches are
        gone. ``head`` keeps its place (and claim): the merged batch is still its topic's head.
        """

    @abstractmethod
    def release(self, entry_id: int) -> None:
        """Give a claimed batch back (it stays the head of its topic)."""

    @abstractmethod
    def remove(self, entry_id: int) -> None:
        """Forget a batch (stored by the service, or refused for good)."""

    @abstractmethod
    def refuse(self, entry_id: int, refusal: Refusal) -> None:
        """Set a batch aside (refused for good): it is not sent any more, but kept."""

    @abstractmethod
    def refused(self) -> list[RefusedBatch]:
        """The batches set aside, oldest first."""

    @abstractmethod
    def retry_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        """Put refused batches (all when ``entry_ids`` is ``None``) back in line, each in its
        original place and unchanged; the batches moved."""

    @abstractmethod
    def purge_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        """Delete refused batches (all when ``entry_ids`` is ``None``); the batches deleted."""

    @abstractmethod
    def entries(self) -> list[OutboxEntry]:
        """Every batch waiting to be sent (not the refused ones), oldest first."""

    @abstractmethod
    def stats(self) -> OutboxStats:
        """How much is stored."""

    @abstractmethod
    def topic_counts(self) -> dict[str, tuple[int, int, int]]:
        """Per topic: (batches, messages, bytes) stored."""

    @abstractmethod
    def add_acks(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        """Keep ``(receipt_handle, expires_ms)`` pairs of ``group`` for a later retry."""

    @abstractmethod
    def claim_acks(self, *, now_ms: int, limit: int = 1000) -> list[PendingAck]:
        """Drop expired acks, then claim up to ``limit`` of the others (one group per ack)."""

    @abstractmethod
    def release_acks(self, ack_ids: Sequence[int]) -> None:
        """Give claimed acks back for a later retry."""

    @abstractmethod
    def remove_acks(self, ack_ids: Sequence[int]) -> None:
        """Forget acks (done, or refused for good)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the storage (idempotent)."""


class MemoryOutbox(Outbox):
    """:class:`Outbox` in memory: nothing survives the process."""

    durable = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: dict[int, OutboxEntry] = {}
        self._claimed: set[int] = set()
        self._acks: dict[int, PendingAck] = {}
        self._claimed_acks: set[int] = set()
        self._refused: dict[int, Refusal] = {}
        self._next_id = 1

    def _pending(self) -> list[OutboxEntry]:
        return [e for i, e in self._batches.items() if i not in self._refused]

    def append(self, batch: OutboxBatch) -> OutboxEntry:
        with self._lock:
            entry = OutboxEntry(self._next_id, batch)
            self._next_id += 1
            self._batches[entry.entry_id] = entry
            return entry

    def claim_heads(self, *, skip_topics: Collection[str] = ()) -> list[OutboxEntry]:
        with self._lock:
            heads: dict[str, OutboxEntry] = {}
            for entry in self._pending():  # insertion order = id order
                heads.setdefault(entry.batch.topic, entry)
            claimed = []
            for topic, head in heads.items():
                if topic in skip_topics or head.entry_id in self._claimed:
                    continue
                head = OutboxEntry(head.entry_id, head.batch, head.attempts + 1)
                self._batches[head.entry_id] = head
                self._claimed.add(head.entry_id)
                claimed.append(head)
            return claimed

    def followers(self, head: OutboxEntry, *, limit: int) -> list[OutboxEntry]:
        with self._lock:
            found: list[OutboxEntry] = []
            for entry in self._pending():
                if len(found) >= limit:
                    break
                if entry.entry_id <= head.entry_id or entry.batch.topic != head.batch.topic:
                    continue
                if entry.attempts or entry.entry_id in self._claimed:
                    break
                found.append(entry)
            return found

    def merge(self, head: OutboxEntry, batch: OutboxBatch, absorbed: Sequence[int]) -> OutboxEntry:
        with self._lock:
            merged = OutboxEntry(head.entry_id, batch, head.attempts)
            self._batches[head.entry_id] = merged  # same key: same place
            for entry_id in absorbed:
                self._batches.pop(entry_id, None)
                self._claimed.discard(entry_id)
            return merged

    def release(self, entry_id: int) -> None:
        with self._lock:
            self._claimed.discard(entry_id)

    def remove(self, entry_id: int) -> None:
        with self._lock:
            self._claimed.discard(entry_id)
            self._batches.pop(entry_id, None)
            self._refused.pop(entry_id, None)

    def refuse(self, entry_id: int, refusal: Refusal) -> None:
        with self._lock:
            if entry_id in self._batches:
                self._claimed.discard(entry_id)
                self._refused[entry_id] = refusal

    def refused(self) -> list[RefusedBatch]:
        with self._lock:
            return self._refused_list(None)

    def _refused_list(self, entry_ids: Collection[int] | None) -> list[RefusedBatch]:
        return [
            RefusedBatch(i, e.batch, self._refused[i])
            for i, e in self._batches.items()
            if i in self._refused and (entry_ids is None or i in entry_ids)
        ]

    def retry_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        with self._lock:
            moved = self._refused_list(entry_ids)
            for refused in moved:
                del self._refused[refused.entry_id]
            return moved

    def purge_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        with self._lock:
            purged = self._refused_list(entry_ids)
            for refused in purged:
                del self._refused[refused.entry_id]
                del self._batches[refused.entry_id]
            return purged

    def entries(self) -> list[OutboxEntry]:
        with self._lock:
            return self._pending()

    def stats(self) -> OutboxStats:
        with self._lock:
            batches = [e.batch for e in self._pending()]
            refused = [self._batches[i].batch for i in self._refused]
            return OutboxStats(
                batches=len(batches),
                messages=sum(len(b.message_ids) for b in batches),
                bytes=sum(len(b.payload) for b in batches),
                acks=len(self._acks),
                refused_batches=len(refused),
                refused_messages=sum(len(b.message_ids) for b in refused),
            )

    def topic_counts(self) -> dict[str, tuple[int, int, int]]:
        counts: dict[str, tuple[int, int, int]] = {}
        with self._lock:
            for entry in self._pending():
                b = entry.batch
                n, m, size = counts.get(b.topic, (0, 0, 0))
                counts[b.topic] = (n + 1, m + len(b.message_ids), size + len(b.payload))
        return counts

    def add_acks(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            known = {(a.group, a.receipt_handle) for a in self._acks.values()}
            for handle, expires_ms in handles:
                if (group, handle) in known:
                    continue
                self._acks[self._next_id] = PendingAck(self._next_id, group, handle, expires_ms)
                self._next_id += 1

    def claim_acks(self, *, now_ms: int, limit: int = 1000) -> list[PendingAck]:
        with self._lock:
            for ack_id in [i for i, a in self._acks.items() if a.expires_ms <= now_ms]:
                del self._acks[ack_id]
                self._claimed_acks.discard(ack_id)
            free = [a for i, a in self._acks.items() if i not in self._claimed_acks][:limit]
            self._claimed_acks.update(a.ack_id for a in free)
            return free

    def release_acks(self, ack_ids: Sequence[int]) -> None:
        with self._lock:
            self._claimed_acks.difference_update(ack_ids)

    def remove_acks(self, ack_ids: Sequence[int]) -> None:
        with self._lock:
            for ack_id in ack_ids:
                self._acks.pop(ack_id, None)
                self._claimed_acks.discard(ack_id)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    entry_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    topic        TEXT    NOT NULL,
    producer_id  TEXT    NOT NULL,
    sequence     INTEGER NOT NULL,
    message_ids  TEXT    NOT NULL,
    message_count INTEGER NOT NULL,
    payload      BLOB    NOT NULL,
    size         INTEGER NOT NULL,
    created_ms   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    claimed      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (producer_id, sequence)
);
CREATE INDEX IF NOT EXISTS batches_by_topic ON batches (topic, entry_id);
CREATE TABLE IF NOT EXISTS acks (
    ack_id         INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name     TEXT    NOT NULL,
    receipt_handle TEXT    NOT NULL,
    expires_ms     INTEGER NOT NULL,
    claimed        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (group_name, receipt_handle)
);
"""
_REFUSAL_COLUMNS = {
    "refused_ms": "INTEGER",
    "refusal_code": "TEXT",
    "refusal_message": "TEXT",
    "refusal_status": "INTEGER",
}
"""Version 2: a batch refused for good is set aside (``refused_ms`` not null), not deleted."""
_SCHEMA_VERSION = 2

_pending = "refused_ms IS NULL"
_heads_of_topics = (
    f"entry_id IN (SELECT MIN(entry_id) FROM batches WHERE {_pending} GROUP BY topic)"
)
_not_claimed = "claimed = 0"
_REFUSED_SELECT = (
    "SELECT entry_id, topic, producer_id, sequence, message_ids, payload, refusal_code,"
    " refusal_message, refusal_status, refused_ms FROM batches WHERE refused_ms IS NOT NULL"
)


class SqliteOutbox(Outbox):
    """:class:`Outbox` in a SQLite file (WAL): survives crashes and restarts.

    ``synchronous=NORMAL``: a committed batch survives the process being killed; a power loss
    may lose the last few commits.
    """

    durable = True

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5_000) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._lock_file = _acquire_file_lock(self.path)
        try:
            self._db = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # autocommit; transactions are explicit
                check_same_thread=False,
            )
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
            # We own the file now: claims of a previous owner (crashed or closed) are void.
            self._db.execute("UPDATE batches SET claimed = 0 WHERE claimed != 0")
            self._db.execute("UPDATE acks SET claimed = 0 WHERE claimed != 0")
        except BaseException:
            self._release_file_lock()
            raise

    def _migrate(self) -> None:
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version > _SCHEMA_VERSION:
            raise RuntimeError(
                f"outbox {self.path} has schema version {version}; this SDK knows "
                f"{_SCHEMA_VERSION}: upgrade the SDK"
            )
        self._db.executescript(_SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(batches)")}
        for name, kind in _REFUSAL_COLUMNS.items():
            if name not in columns:
                self._db.execute(f"ALTER TABLE batches ADD COLUMN {name} {kind}")
        self._db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db, self._lock)

    def append(self, batch: OutboxBatch) -> OutboxEntry:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO batches (topic, producer_id, sequence, message_ids, message_count,"
                " payload, size, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    batch.topic,
                    batch.producer_id,
                    batch.sequence,
                    json.dumps(batch.message_ids),
                    len(batch.message_ids),
                    batch.payload,
                    len(batch.payload),
                    int(time.time() * 1000),
                ),
            )
            return OutboxEntry(int(cursor.lastrowid or 0), batch)

    def claim_heads(self, *, skip_topics: Collection[str] = ()) -> list[OutboxEntry]:
        with self._transaction() as db:
            rows = db.execute(
                "SELECT entry_id, topic, producer_id, sequence, message_ids, payload, attempts"
                f" FROM batches WHERE {_heads_of_topics} AND {_not_claimed} ORDER BY entry_id"
            ).fetchall()
            claimed = [_entry(row) for row in rows if row[1] not in skip_topics]
            db.executemany(
                "UPDATE batches SET claimed = 1, attempts = attempts + 1 WHERE entry_id = ?",
                [(e.entry_id,) for e in claimed],
            )
            return [OutboxEntry(e.entry_id, e.batch, e.attempts + 1) for e in claimed]

    def followers(self, head: OutboxEntry, *, limit: int) -> list[OutboxEntry]:
        with self._lock:
            rows = self._db.execute(
                "SELECT entry_id, topic, producer_id, sequence, message_ids, payload, attempts,"
                " claimed FROM batches WHERE topic = ? AND entry_id > ? AND refused_ms IS NULL"
                " ORDER BY entry_id LIMIT ?",
                (head.batch.topic, head.entry_id, limit),
            ).fetchall()
        found: list[OutboxEntry] = []
        for *row, claimed in rows:
            entry = _entry(tuple(row))
            if entry.attempts or claimed:
                break
            found.append(entry)
        return found

    def merge(self, head: OutboxEntry, batch: OutboxBatch, absorbed: Sequence[int]) -> OutboxEntry:
        with self._transaction() as db:
            db.execute(
                "UPDATE batches SET producer_id = ?, sequence = ?, message_ids = ?,"
                " message_count = ?, payload = ?, size = ? WHERE entry_id = ?",
                (
                    batch.producer_id,
                    batch.sequence,
                    json.dumps(batch.message_ids),
                    len(batch.message_ids),
                    batch.payload,
                    len(batch.payload),
                    head.entry_id,
                ),
            )
            db.executemany("DELETE FROM batches WHERE entry_id = ?", [(i,) for i in absorbed])
        return OutboxEntry(head.entry_id, batch, head.attempts)

    def release(self, entry_id: int) -> None:
        with self._transaction() as db:
            db.execute("UPDATE batches SET claimed = 0 WHERE entry_id = ?", (entry_id,))

    def remove(self, entry_id: int) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM batches WHERE entry_id = ?", (entry_id,))

    def refuse(self, entry_id: int, refusal: Refusal) -> None:
        with self._transaction() as db:
            db.execute(
                "UPDATE batches SET claimed = 0, refused_ms = ?, refusal_code = ?,"
                " refusal_message = ?, refusal_status = ? WHERE entry_id = ?",
                (
                    refusal.refused_ms,
                    refusal.code,
                    refusal.message,
                    refusal.http_status,
                    entry_id,
                ),
            )

    def refused(self) -> list[RefusedBatch]:
        with self._lock:
            rows = self._db.execute(f"{_REFUSED_SELECT} ORDER BY entry_id").fetchall()
        return [_refused(row) for row in rows]

    def _take_refused(
        self, db: sqlite3.Connection, entry_ids: Collection[int] | None
    ) -> list[RefusedBatch]:
        rows = db.execute(f"{_REFUSED_SELECT} ORDER BY entry_id").fetchall()
        wanted = None if entry_ids is None else set(entry_ids)
        return [_refused(r) for r in rows if wanted is None or r[0] in wanted]

    def retry_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        with self._transaction() as db:
            moved = self._take_refused(db, entry_ids)
            db.executemany(
                "UPDATE batches SET refused_ms = NULL, refusal_code = NULL,"
                " refusal_message = NULL, refusal_status = NULL WHERE entry_id = ?",
                [(r.entry_id,) for r in moved],
            )
        return moved

    def purge_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        with self._transaction() as db:
            purged = self._take_refused(db, entry_ids)
            db.executemany(
                "DELETE FROM batches WHERE entry_id = ?", [(r.entry_id,) for r in purged]
            )
        return purged

    def entries(self) -> list[OutboxEntry]:
        with self._lock:
            rows = self._db.execute(
                "SELECT entry_id, topic, producer_id, sequence, message_ids, payload, attempts"
                f" FROM batches WHERE {_pending} ORDER BY entry_id"
            ).fetchall()
        return [_entry(row) for row in rows]

    def stats(self) -> OutboxStats:
        totals = "COUNT(*), COALESCE(SUM(message_count), 0), COALESCE(SUM(size), 0)"
        with self._lock:
            batches, messages, size = self._db.execute(
                f"SELECT {totals} FROM batches WHERE {_pending}"
            ).fetchone()
            refused, refused_messages, _ = self._db.execute(
                f"SELECT {totals} FROM batches WHERE NOT ({_pending})"
            ).fetchone()
            (acks,) = self._db.execute("SELECT COUNT(*) FROM acks").fetchone()
        return OutboxStats(
            batches=batches,
            messages=messages,
            bytes=size,
            acks=acks,
            refused_batches=refused,
            refused_messages=refused_messages,
        )

    def topic_counts(self) -> dict[str, tuple[int, int, int]]:
        with self._lock:
            rows = self._db.execute(
                "SELECT topic, COUNT(*), SUM(message_count), SUM(size) FROM batches"
                f" WHERE {_pending} GROUP BY topic"
            ).fetchall()
        return {topic: (n, m, size) for topic, n, m, size in rows}

    def add_acks(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO acks (group_name, receipt_handle, expires_ms)"
                " VALUES (?, ?, ?)",
                [(group, handle, expires_ms) for handle, expires_ms in handles],
            )

    def claim_acks(self, *, now_ms: int, limit: int = 1000) -> list[PendingAck]:
        with self._transaction() as db:
            db.execute("DELETE FROM acks WHERE expires_ms <= ?", (now_ms,))
            rows = db.execute(
                "SELECT ack_id, group_name, receipt_handle, expires_ms FROM acks"
                f" WHERE {_not_claimed} ORDER BY ack_id LIMIT ?",
                (limit,),
            ).fetchall()
            db.executemany("UPDATE acks SET claimed = 1 WHERE ack_id = ?", [(r[0],) for r in rows])
        return [PendingAck(*row) for row in rows]

    def release_acks(self, ack_ids: Sequence[int]) -> None:
        with self._transaction() as db:
            db.executemany("UPDATE acks SET claimed = 0 WHERE ack_id = ?", [(i,) for i in ack_ids])

    def remove_acks(self, ack_ids: Sequence[int]) -> None:
        with self._transaction() as db:
            db.executemany("DELETE FROM acks WHERE ack_id = ?", [(i,) for i in ack_ids])

    def close(self) -> None:
        with self._lock:
            if self._lock_file is None:
                return
            self._db.close()
            self._release_file_lock()

    def _release_file_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing the descriptor drops the flock
            self._lock_file = None


class _Transaction:
    """``with``: the connection under the instance lock, inside ``BEGIN IMMEDIATE`` … ``COMMIT``."""

    def __init__(self, db: sqlite3.Connection, lock: threading.Lock) -> None:
        self._db, self._lock = db, lock

    def __enter__(self) -> sqlite3.Connection:
        self._lock.acquire()
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        return self._db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            self._db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self._lock.release()


def _entry(row: tuple) -> OutboxEntry:
    entry_id, topic, producer_id, sequence, message_ids, payload, attempts = row
    batch = OutboxBatch(topic, producer_id, sequence, tuple(json.loads(message_ids)), payload)
    return OutboxEntry(entry_id, batch, attempts)


def _refused(row: tuple) -> RefusedBatch:
    entry_id, topic, producer_id, sequence, message_ids, payload, *refusal = row
    code, message, status, refused_ms = refusal
    batch = OutboxBatch(topic, producer_id, sequence, tuple(json.loads(message_ids)), payload)
    return RefusedBatch(entry_id, batch, Refusal(code, message or "", status, refused_ms))


def _acquire_file_lock(path: Path):  # noqa: ANN202 - an open file object
    handle = open(f"{path}.lock", "a+")  # noqa: SIM115 - held open while the outbox is
    if fcntl is None:  # pragma: no cover
        return handle
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        raise OutboxLockedError(
            f"the outbox {path} is in use by another client (one client per outbox file)"
        ) from exc
    return handle
