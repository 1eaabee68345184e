"""Delayed messages: a send schedules them, a release run makes them visible when due, a
cancel takes one back before.

- :mod:`.schedule`: the delayed half of a send (due times, the delay object, its items);
- :mod:`.release`: the release run moving due messages into their topics (the scheduler
  function runs it);
- :mod:`.wake`: a send whose message falls due before the next scheduled run starts one;
- :mod:`.cancel`: cancelling a delayed message by id before it is due.

The pure rules (delay levels, due times, delay groups) are in :mod:`cirrusmq_broker.rules.delays`;
the delay items and objects are stored by :mod:`cirrusmq_broker.storage.delays`.
"""

from __future__ import annotations

from .cancel import DelayCancel
from .release import DelayRelease
from .schedule import DelayWriter
from .wake import ReleaseWake

__all__ = ["DelayCancel", "DelayRelease", "DelayWriter", "ReleaseWake"]
