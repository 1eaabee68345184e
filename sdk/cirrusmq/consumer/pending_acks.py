"""Acks that could not reach the service, kept and retried until their receipt handles expire.

A consumer given an ``outbox_path`` keeps such acks in a SQLite file there
(:class:`SqlitePendingAcks`: they survive a restart; one client per file), otherwise in memory
(:class:`MemoryPendingAcks`); :class:`AckRetrier` retries them from a background thread. Acks
that end expired or invalid are logged and dropped: the service redelivers those messages.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import ClassVar

from ..errors import MQError
from ..sqlite_file import OwnedDatabase
from ..transport import RetryPolicy, Transport
from .acks import AckReply, ack_plan, is_per_handle_error, is_too_wide, log_unacked
from .paths import group_path

__all__ = [
    "AckRetrier",
    "MemoryPendingAcks",
    "PendingAck",
    "PendingAcks",
    "SqlitePendingAcks",
    "make_retrier",
]

log = logging.getLogger("cirrusmq.consumer")

_ONE_ATTEMPT = RetryPolicy(max_attempts=1)


@dataclass(frozen=True)
class PendingAck:
    """An ack that could not reach the service, kept until its receipt handle expires."""

    ack_id: int
    group: str
    receipt_handle: str
    expires_ms: int
    """When the handle stops being useful (the message's ``invisible_until``)."""


class PendingAcks(ABC):
    """Where acks wait for the service, each until its receipt handle expires."""

    durable: ClassVar[bool]
    """Whether the acks kept survive the process (then a shutdown leaves them for the next)."""

    @abstractmethod
    def add(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        """Keep ``(receipt_handle, expires_ms)`` pairs of ``group`` for a later retry (a pair
        already kept is kept once)."""

    @abstractmethod
    def claim(self, *, now_ms: int, limit: int = 1000) -> list[PendingAck]:
        """Drop expired acks, then claim up to ``limit`` of the others (one group per ack)."""

    @abstractmethod
    def release(self, ack_ids: Sequence[int]) -> None:
        """Give claimed acks back for a later retry."""

    @abstractmethod
    def remove(self, ack_ids: Sequence[int]) -> None:
        """Forget acks (done, or refused for good)."""

    @abstractmethod
    def count(self) -> int:
        """How many acks wait (claimed or not)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the storage (idempotent)."""


class MemoryPendingAcks(PendingAcks):
    """:class:`PendingAcks` in memory: nothing survives the process."""

    durable = False

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._acks: dict[int, PendingAck] = {}
        self._claimed: set[int] = set()
        self._next_id = 1

    def add(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        with self._lock:
            known = {(a.group, a.receipt_handle) for a in self._acks.values()}
            for handle, expires_ms in handles:
                if (group, handle) in known:
                    continue
                self._acks[self._next_id] = PendingAck(self._next_id, group, handle, expires_ms)
                self._next_id += 1

    def claim(self, *, now_ms: int, limit: int = 1000) -> list[PendingAck]:
        with self._lock:
            for ack_id in [i for i, a in self._acks.items() if a.expires_ms <= now_ms]:
                del self._acks[ack_id]
                self._claimed.discard(ack_id)
            free = [a for i, a in self._acks.items() if i not in self._claimed][:limit]
            self._claimed.update(a.ack_id for a in free)
            return free

    def release(self, ack_ids: Sequence[int]) -> None:
        with self._lock:
            self._claimed.difference_update(ack_ids)

    def remove(self, ack_ids: Sequence[int]) -> None:
        with self._lock:
            for ack_id in ack_ids:
                self._acks.pop(ack_id, None)
                self._claimed.discard(ack_id)

    def count(self) -> int:
        with self._lock:
            return len(self._acks)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS acks (
    ack_id         INTEGER PRIMARY KEY AUTOINCREMENT,
    group_name     TEXT    NOT NULL,
    receipt_handle TEXT    NOT NULL,
    expires_ms     INTEGER NOT NULL,
    claimed        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (group_name, receipt_handle)
);
"""
"""The ``acks`` table, as the outbox files of earlier SDK versions hold it too."""


class SqlitePendingAcks(PendingAcks):
    """:class:`PendingAcks` in a SQLite file (WAL): they survive crashes and restarts."""

    durable = True

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5_000) -> None:
        self._file = OwnedDatabase(path, busy_timeout_ms=busy_timeout_ms, prepare=_prepare)
        self.path = self._file.path

    def add(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        with self._file.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO acks (group_name, receipt_handle, expires_ms)"
                " VALUES (?, ?, ?)",
                [(group, handle, expires_ms) for handle, expires_ms in handles],
            )

    def claim(self, *, now_ms: int, limit: int = 1000) -> list[PendingAck]:
        with self._file.transaction() as db:
            db.execute("DELETE FROM acks WHERE expires_ms <= ?", (now_ms,))
            rows = db.execute(
                "SELECT ack_id, group_name, receipt_handle, expires_ms FROM acks"
                " WHERE claimed = 0 ORDER BY ack_id LIMIT ?",
                (limit,),
            ).fetchall()
            db.executemany("UPDATE acks SET claimed = 1 WHERE ack_id = ?", [(r[0],) for r in rows])
        return [PendingAck(*row) for row in rows]

    def release(self, ack_ids: Sequence[int]) -> None:
        with self._file.transaction() as db:
            db.executemany("UPDATE acks SET claimed = 0 WHERE ack_id = ?", [(i,) for i in ack_ids])

    def remove(self, ack_ids: Sequence[int]) -> None:
        with self._file.transaction() as db:
            db.executemany("DELETE FROM acks WHERE ack_id = ?", [(i,) for i in ack_ids])

    def count(self) -> int:
        with self._file.lock:
            (count,) = self._file.db.execute("SELECT COUNT(*) FROM acks").fetchone()
        return count

    def close(self) -> None:
        self._file.close()


def _prepare(db: sqlite3.Connection) -> None:
    db.executescript(_SCHEMA)
    # We own the file now: claims of a previous owner (crashed or closed) are void.
    db.execute("UPDATE acks SET claimed = 0 WHERE claimed != 0")


class AckRetrier:
    """Retries acks that failed for want of the service, until their receipt handles expire.

    Pending acks live in a :class:`PendingAcks` store (durable with a SQLite one, so they
    survive a restart). A background thread retries them every ``interval_s``.
    """

    def __init__(
        self, store: PendingAcks, transport: Transport, *, interval_s: float = 2.0
    ) -> None:
        self.store = store
        self._transport = transport
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        if store.count():
            self._ensure_thread()

    def park(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        """Keep ``(receipt_handle, expires_ms)`` pairs of ``group`` for retrying."""
        self.store.add(group, handles)
        self._ensure_thread()

    def pending(self) -> int:
        """How many acks wait."""
        return self.store.count()

    def retry_now(self) -> None:
        """Wake the retry thread at once."""
        self._wake.set()

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="cirrusmq-ack-retry", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.flush_once()
            except Exception:  # pragma: no cover - keep retrying, loudly
                log.exception("retrying pending acks failed")

    def flush_once(self) -> None:
        """Try every pending ack once. Acked, expired and invalid handles are done (the last
        two are logged and dropped); acks the service cannot take now wait for the next try."""
        pending = self.store.claim(now_ms=int(time.time() * 1000))
        by_group: dict[str, list] = {}
        for ack in pending:
            by_group.setdefault(ack.group, []).append(ack)
        for group, acks in by_group.items():
            ids = {a.receipt_handle: a.ack_id for a in acks}
            steps = ack_plan(list(ids))
            try:
                chunk = next(steps)
                while True:
                    reply: AckReply
                    try:
                        reply = self._transport.request(
                            "POST",
                            group_path(group, "ack"),
                            json_body={"receipt_handles": chunk},
                            retry=_ONE_ATTEMPT,
                        )
                    except MQError as error:
                        if not (is_per_handle_error(error) or is_too_wide(error)):
                            raise  # else the plan resolves it
                        reply = error
                    chunk = steps.send(reply)
            except StopIteration as done:
                log_unacked(done.value, group, what="pending acks")
                self.store.remove([ids[r.receipt_handle] for r in done.value])
            except MQError as error:
                if error.retriable:
                    self.store.release([a.ack_id for a in acks])
                else:
                    log.error("dropping %d pending ack(s) of %s: %s", len(acks), group, error)
                    self.store.remove([a.ack_id for a in acks])

    def close(self) -> None:
        """Stop retrying (pending acks stay in a durable store)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.store.close()


def make_retrier(transport: Transport, outbox_path: str | PathLike[str] | None) -> AckRetrier:
    """An :class:`AckRetrier` on a SQLite file at ``outbox_path``, else in memory."""
    store: PendingAcks = SqlitePendingAcks(outbox_path) if outbox_path else MemoryPendingAcks()
    return AckRetrier(store, transport)
