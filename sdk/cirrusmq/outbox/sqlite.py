""":class:`SqliteOutbox`: the outbox contract in a SQLite file (WAL): survives crashes and
restarts. One client owns a file at a time (:class:`~cirrusmq.sqlite_file.OwnedDatabase`);
claims are made and marked in one ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection, Sequence
from pathlib import Path

from ..sqlite_file import OwnedDatabase, Transaction
from .base import Outbox, OutboxBatch, OutboxEntry, OutboxStats, Refusal, RefusedBatch

__all__ = ["SqliteOutbox"]

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
        self._file = OwnedDatabase(path, busy_timeout_ms=busy_timeout_ms, prepare=self._prepare)
        self._db, self._lock = self._file.db, self._file.lock

    def _prepare(self, db: sqlite3.Connection) -> None:
        self._migrate(db)
        # We own the file now: claims of a previous owner (crashed or closed) are void.
        db.execute("UPDATE batches SET claimed = 0 WHERE claimed != 0")

    def _migrate(self, db: sqlite3.Connection) -> None:
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version > _SCHEMA_VERSION:
            raise RuntimeError(
                f"outbox {self.path} has schema version {version}; this SDK knows "
                f"{_SCHEMA_VERSION}: upgrade the SDK"
            )
        db.executescript(_SCHEMA)
        columns = {row[1] for row in db.execute("PRAGMA table_info(batches)")}
        for name, kind in _REFUSAL_COLUMNS.items():
            if name not in columns:
                db.execute(f"ALTER TABLE batches ADD COLUMN {name} {kind}")
        db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    def _transaction(self) -> Transaction:
        return self._file.transaction()

    def append(self, batch: OutboxBatch) -> OutboxEntry:
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO batches (topic, producer_id, sequence, message_ids, message_count,"
                " payload, size, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (batch.topic, *_columns(batch), int(time.time() * 1000)),
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
                (*_columns(batch), head.entry_id),
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
        return OutboxStats(
            batches=batches,
            messages=messages,
            bytes=size,
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

    def close(self) -> None:
        self._file.close()


def _columns(batch: OutboxBatch) -> tuple[str, int, str, int, bytes, int]:
    """``producer_id, sequence, message_ids, message_count, payload, size`` of a stored row."""
    return (
        batch.producer_id,
        batch.sequence,
        json.dumps(batch.message_ids),
        len(batch.message_ids),
        batch.payload,
        len(batch.payload),
    )


def _entry(row: tuple) -> OutboxEntry:
    entry_id, topic, producer_id, sequence, message_ids, payload, attempts = row
    batch = OutboxBatch(topic, producer_id, sequence, tuple(json.loads(message_ids)), payload)
    return OutboxEntry(entry_id, batch, attempts)


def _refused(row: tuple) -> RefusedBatch:
    entry_id, topic, producer_id, sequence, message_ids, payload, *refusal = row
    code, message, status, refused_ms = refusal
    batch = OutboxBatch(topic, producer_id, sequence, tuple(json.loads(message_ids)), payload)
    return RefusedBatch(entry_id, batch, Refusal(code, message or "", status, refused_ms))
