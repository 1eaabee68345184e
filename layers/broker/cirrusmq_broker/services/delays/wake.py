"""Waking a release run for a message due before the next run on the minute schedule.

A release run returns at once when nothing is due within it (it costs nothing at rest),
so a send whose delayed message falls due before the next scheduled run may need a run
started for it: one asynchronous invoke. Whether one is needed is decided on the shared
run lease (the delay items table's checkpoint item,
:class:`~cirrusmq_broker.storage.run_leases.RunLease`), never on what this process asked
for:

- a run that loops holds ``run_until``: it never returns before then, so a due time well
  inside it needs nothing (the lease is read at most once a second per process);
- otherwise the send asks for a run with one conditional write of ``asked_at``; it is
  refused while another send's ask is pending (no run has started since, see
  :meth:`DelayRelease.run`): that run is still to come and will see this message.

So every container's sends of one minute start one run, and a run that returns early (its
messages moved by another) leaves no ask behind that would hold back the next send.
A due time more than a schedule period in the past (a replayed send) was seen by the
scheduled runs already: it wakes nothing. A failed wake never fails the send: the next
scheduled run moves the message, later.

The transaction back-checker's runs are woken the same way, on their own lease (a half
send whose first check falls due before the checker's next firing:
services/transactions/checks.py).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ...storage.run_leases import RunLease, RunLeaseStore

log = logging.getLogger(__name__)

WAKE_HORIZON_MS = 61_000
"""A due time further ahead is seen by the next scheduled run (every minute) at its start."""
SCHEDULE_PERIOD_MS = 60_000
"""The scheduled runs' period: a due time older than this was seen by one of them."""
LEASE_MARGIN_MS = 4_000
"""A lease covers a due time at least this much before its end (the run's last ticks,
clock skew between containers)."""
LEASE_CACHE_MS = 1_000
"""A process reuses the lease it read this long."""
ASK_PENDING_MS = 10_000
"""An ask no run answered within this long is taken as lost: the next send asks again."""
COVERED_MS = 55_000
"""A run asked for at T moves what falls due until about T + 59 s: a due time from
T + COVERED_MS on needs a run of its own."""


class ReleaseWake:
    """Starts a release run when a send's delayed messages fall due before the next
    scheduled one and no running release covers them."""

    def __init__(self, start: Callable[[], None], clock: Callable[[], int]) -> None:
        self._start = start
        self._clock = clock
        self._lease: tuple[RunLease, int] | None = None
        """(the lease, when read)."""
        self._lock = threading.Lock()

    def due_at(self, dues: list[int], runs: RunLeaseStore) -> None:
        """Messages fall due at ``dues``: start a run unless the run lease in ``runs``
        covers those the next scheduled run may not see. Never raises."""
        now = self._clock()
        soon = [d for d in dues if now - SCHEDULE_PERIOD_MS <= d <= now + WAKE_HORIZON_MS]
        if not soon:
            return
        latest = max(soon)
        try:
            if self._lease_covers(latest, now, runs):
                return
            pending_since = max(now - ASK_PENDING_MS, latest - COVERED_MS + 1)
            if not runs.ask_run(now, pending_since=pending_since):
                return  # another send asked for a run that has not started yet
        except Exception:  # noqa: BLE001 - a wake never fails the send
            log.warning("could not read the release run lease; waking it", exc_info=True)
        try:
            self._start()
        except Exception:  # noqa: BLE001 - a wake never fails the send
            log.warning(
                "could not wake a release run; the next scheduled run moves the message",
                exc_info=True,
            )
            try:
                runs.withdraw_ask(now)  # no run answers it: let the next send ask again
            except Exception:  # noqa: BLE001
                log.warning("could not withdraw the release wake's ask", exc_info=True)

    def _lease_covers(self, due: int, now: int, runs: RunLeaseStore) -> bool:
        with self._lock:
            cached = self._lease
        if cached is None or now - cached[1] >= LEASE_CACHE_MS or now < cached[1]:
            cached = (runs.run_lease(), now)
            with self._lock:
                self._lease = cached
        return due <= cached[0].run_until - LEASE_MARGIN_MS
