"""Waking the delay scheduler for a message due before its next scheduled run.

A scheduler run returns at once when nothing is due within it (it costs nothing at rest),
so a send whose delayed message falls due before the next run looks starts a run itself:
one asynchronous invoke, at most once per ``COVERED_MS`` per process (a run it starts
works through the ~59 s after it; overlapping runs are harmless). A failed wake never
fails the send: the next scheduled run moves the message, later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from botocore.exceptions import BotoCoreError, ClientError

from ..errors import BrokerError

log = logging.getLogger(__name__)

WAKE_HORIZON_MS = 61_000
"""A due time further ahead is seen by the next scheduled run (every minute) at its start."""
COVERED_MS = 55_000
"""A run started at T moves what falls due until about T + 59 s: a due time before
T + COVERED_MS needs no other wake."""


class SchedulerWake:
    def __init__(self, start: Callable[[], None], clock: Callable[[], int]) -> None:
        self._start = start
        self._clock = clock
        self._started_at: int | None = None
        self._lock = threading.Lock()

    def due_at(self, due_ms: int) -> None:
        """A message falls due at ``due_ms``: start a run unless one covers it."""
        now = self._clock()
        if due_ms > now + WAKE_HORIZON_MS:
            return
        with self._lock:
            if (
                self._started_at is not None
                and self._started_at <= now
                and (due_ms < self._started_at + COVERED_MS)
            ):
                return
            self._started_at = now
        try:
            self._start()
        except (BrokerError, ClientError, BotoCoreError):
            with self._lock:
                self._started_at = None
            log.warning("could not wake the delay scheduler; its next run moves the message")
