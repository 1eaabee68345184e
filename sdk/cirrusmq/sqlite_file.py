"""A local SQLite file owned by one client: the outbox and the consumer's pending acks.

:class:`OwnedDatabase` takes the file's lock (:mod:`.file_lock`), opens it in WAL mode with a
busy timeout and ``synchronous=NORMAL`` (a committed write survives the process being killed;
a power loss may lose the last few commits), and runs writes in ``BEGIN IMMEDIATE``
transactions under an instance lock (one connection shared by the client's threads).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from .errors import MQError, OutboxLockedError
from .file_lock import hold_exclusively

__all__ = ["OwnedDatabase", "Transaction"]


class Transaction:
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


class OwnedDatabase:
    """A SQLite file held by this client alone (``<path>.lock``) until :meth:`close`.

    ``prepare`` runs on the fresh connection (schema, migration, voiding the claims of a
    previous owner); if it fails the file is released again.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5_000,
        prepare: Callable[[sqlite3.Connection], None],
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self._lock_file = hold_exclusively(Path(f"{self.path}.lock"), self._in_use)
        try:
            self.db = sqlite3.connect(
                self.path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,  # autocommit; transactions are explicit
                check_same_thread=False,
            )
            self.db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            prepare(self.db)
        except BaseException:
            self._release_file_lock()
            raise

    def _in_use(self) -> MQError:
        return OutboxLockedError(
            f"the outbox {self.path} is in use by another client (one client per outbox file)"
        )

    def transaction(self) -> Transaction:
        """A write transaction (``with``)."""
        return Transaction(self.db, self.lock)

    def close(self) -> None:
        """Close the connection and release the file (idempotent)."""
        with self.lock:
            if self._lock_file is None:
                return
            self.db.close()
            self._release_file_lock()

    def _release_file_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing the descriptor drops the flock
            self._lock_file = None
