"""Waking the delay scheduler for a message due before its next scheduled run.

A scheduler run returns at once when nothing is due within it (it costs nothing at rest),
so a send whose delayed message falls due before the next run looks starts a run itself:
one asynchronous invoke, and no other from this process while the run it started covers
the send's due times (it works through the ~59 s after it; overlapping runs are
harmless). A failed wake never
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

    def due_at(self, dues: list[int]) -> None:
        """Messages fall due at ``dues``: start a run unless one covers those that the
        next scheduled run may not see (due within WAKE_HORIZON_MS)."""
        now = self._clock()
        soon = [due for due in dues if due <= now + WAKE_HORIZON_MS]
        if not soon:
            return
        latest = max(soon)
        with self._lock:
            started = self._started_at
            if started is not None and started <= now and latest < started + COVERED_MS:
                return
            self._started_at = now
        try:
            self._start()
        except (BrokerError, ClientError, BotoCoreError):
            with self._lock:
                self._started_at = started
            log.warning("could not wake the delay scheduler; its next run moves the message")
