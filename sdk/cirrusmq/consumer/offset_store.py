"""Local consumer offsets in SQLite: where pull and broadcast consumers go on after a restart.

One table, ``offsets(owner, topic, queue, next_offset)``: ``owner`` names one consumer
instance (``<group>/<instance id>``). The file defaults to ``offsets.db`` next to the CLI's
profile file (``~/.cirrusmq/``, or the folder of ``$CIRRUSMQ_CONFIG``); pass a path to keep it
elsewhere (as with the producer's ``outbox_path``). WAL and a busy timeout let several
consumers (threads or processes) share one file; each writes only its own rows. A commit is
one transaction: after a crash a consumer resumes from its last commit.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path

from ..config import default_config_path

__all__ = ["OffsetStore", "default_offset_store_path"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS offsets (
    owner TEXT NOT NULL,
    topic TEXT NOT NULL,
    queue INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    PRIMARY KEY (owner, topic, queue)
)
"""


def default_offset_store_path() -> Path:
    """``offsets.db`` in the folder of the CLI's profile file (``~/.cirrusmq/``)."""
    return default_config_path().parent / "offsets.db"


class OffsetStore:
    """Committed offsets of consumer instances, durable in a SQLite file (thread-safe)."""

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, busy_timeout_ms: int = 5_000
    ) -> None:
        self.path = Path(path) if path is not None else default_offset_store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(_SCHEMA)

    def load(self, owner: str, topic: str) -> dict[int, int]:
        """Queue -> committed next offset of ``owner`` on ``topic``."""
        with self._lock:
            rows = self._db.execute(
                "SELECT queue, next_offset FROM offsets WHERE owner = ? AND topic = ?",
                (owner, topic),
            ).fetchall()
        return {int(q): int(o) for q, o in rows}

    def save(self, owner: str, topic: str, offsets: Mapping[int, int], *, now_ms: int) -> None:
        """Store ``owner``'s next offsets on ``topic`` (one transaction)."""
        if not offsets:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO offsets (owner, topic, queue, next_offset, updated_ms) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (owner, topic, queue) DO UPDATE SET "
                    "next_offset = excluded.next_offset, updated_ms = excluded.updated_ms",
                    [(owner, topic, q, o, now_ms) for q, o in sorted(offsets.items())],
                )
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def forget(self, owner: str, topic: str | None = None) -> None:
        """Drop ``owner``'s offsets (on one topic, or all)."""
        with self._lock:
            if topic is None:
                self._db.execute("DELETE FROM offsets WHERE owner = ?", (owner,))
            else:
                self._db.execute(
                    "DELETE FROM offsets WHERE owner = ? AND topic = ?", (owner, topic)
                )

    def close(self) -> None:
        with self._lock:
            self._db.close()
