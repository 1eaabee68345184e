"""The producer's outbox: sealed send requests waiting for the service.

:class:`Outbox` is the storage contract (``base``); :class:`SqliteOutbox` keeps it in a file
(durable, one client per file), :class:`MemoryOutbox` in memory.
"""

from __future__ import annotations

from .base import Outbox, OutboxBatch, OutboxEntry, OutboxStats, Refusal, RefusedBatch
from .memory import MemoryOutbox
from .sqlite import SqliteOutbox

__all__ = [
    "MemoryOutbox",
    "Outbox",
    "OutboxBatch",
    "OutboxEntry",
    "OutboxStats",
    "RefusedBatch",
    "Refusal",
    "SqliteOutbox",
]
