"""The local stack's side of DynamoDB TTL and S3 lifecycle expiry, on the broker's clock.

:class:`Expiry` asks the moto server (``POST /_cirrusmq/ttl`` and ``/_cirrusmq/lifecycle``,
see :mod:`cirrusmq_local.moto_expiry`) to expire what is due at ``clock.now_ms()``: on a
timer, a bounded slice per table and bucket per tick, and on demand a full pass. It keeps
the history of the clock's offset so that an object's age is measured on the broker clock.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from cirrusmq_broker import clock

__all__ = ["Expiry", "wall_ms"]

log = logging.getLogger(__name__)


class Expiry:
    """TTL deletes for ``ttl_tables`` and lifecycle expiry for ``buckets`` in moto at ``url``.

    ``lifecycle_rules(bucket)`` returns the bucket's rules in S3 API shape (read from moto
    on every run, so rules changed at runtime apply).
    """

    def __init__(
        self,
        url: str,
        ttl_tables: Sequence[str],
        buckets: Sequence[str],
        lifecycle_rules: Callable[[str], list[dict[str, Any]]],
        *,
        budget: int = 5000,
        timeout: float = 60.0,
        history: Sequence[Sequence[int]] = (),
    ) -> None:
        self.url = url.rstrip("/")
        self.ttl_tables = list(ttl_tables)
        self.buckets = list(buckets)
        self.lifecycle_rules = lifecycle_rules
        self.budget = budget
        self.timeout = timeout
        self._history: list[list[int]] = [list(change) for change in history or ()] or [
            [0, clock.offset_ms()]
        ]
        self._last_run_wall_ms = wall_ms()
        self._run_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- clock
    @property
    def history(self) -> list[list[int]]:
        """``[since_wall_ms, offset_ms]`` changes of the clock's offset, oldest first."""
        return [list(change) for change in self._history]

    def note_advance(self, since_wall_ms: int) -> None:
        """Record the clock's offset after ``clock.advance``, in force since ``since_wall_ms``
        (the wall time just before the advance: a write under way then counts as later,
        so as younger — it expires later, never earlier)."""
        self._note_offset(since_wall_ms)

    def _note_offset(self, since_wall_ms: int) -> None:
        offset = clock.offset_ms()
        if offset != self._history[-1][1]:
            self._history.append([max(since_wall_ms, self._history[-1][0]), offset])

    # ------------------------------------------------------------------- runs
    def run(self, *, full: bool = False) -> dict[str, int]:
        """Expire what is due now: a bounded slice of each table and bucket, or with
        ``full`` whole passes over them. Returns ``{"items": n, "objects": m}`` deleted."""
        with self._run_lock:
            # a clock moved without note_advance(): assume it moved at the last run (younger)
            self._note_offset(self._last_run_wall_ms)
            self._last_run_wall_ms = wall_ms()
            return {"items": self._run_ttl(full), "objects": self._run_lifecycle(full)}

    def _run_ttl(self, full: bool) -> int:
        deleted, pending = 0, list(self.ttl_tables)
        while pending:
            answer = self._post(
                "ttl", {"now_s": clock.now_ms() / 1000, "budget": self.budget, "tables": pending}
            )
            results = answer["tables"]
            deleted += sum(int(r["deleted"]) for r in results.values())
            pending = [name for name, r in results.items() if full and not r["done"]]
        return deleted

    def _run_lifecycle(self, full: bool) -> int:
        deleted = 0
        for bucket in self.buckets:
            rules = self.lifecycle_rules(bucket)
            while True:
                answer = self._post(
                    "lifecycle",
                    {
                        "bucket": bucket,
                        "rules": rules,
                        "now_ms": clock.now_ms(),
                        "clock_history": self._history,
                        "budget": self.budget,
                    },
                )
                deleted += int(answer["deleted"])
                if not full or answer["done"]:
                    break
        return deleted

    def _post(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            f"{self.url}/_cirrusmq/{action}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return dict(json.loads(response.read()))

    # ------------------------------------------------------------------ timer
    def start(self, interval: float) -> None:
        """Run a bounded slice every ``interval`` seconds on a daemon thread."""
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(interval,), daemon=True, name="cirrusmq-expiry"
        )
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.run()
            except Exception:  # noqa: BLE001 - a failed tick must not end the timer
                log.exception("local TTL/lifecycle expiry failed")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the timer (waits up to ``timeout`` for a running slice)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


def wall_ms() -> int:
    return time.time_ns() // 1_000_000
