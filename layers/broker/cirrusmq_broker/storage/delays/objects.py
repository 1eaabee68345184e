"""Delay objects in S3 (``timers/``): the delayed messages of one send, written once.

They are not topic data: the orphan sweeper lists ``topics/`` only and never sees them.
A release run deletes a delay object once every delay item of it moved. As a safety net
(a crash between the move and that delete) each object is tagged with a lifecycle tier
that outlives its last due time plus the topic's retention (up to 365 + 90 days).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..batch_objects import RETENTION_TIERS_DAYS, BatchObjectStore

DELAYS_PREFIX = "timers/"
DELAY_TIERS_DAYS = (*RETENTION_TIERS_DAYS, 180, 460)
"""The batch tiers plus two longer ones for far-future delays; must match the bucket's
lifecycle rules in template.yaml."""


def delay_object_key(stored_ms: int, name: str) -> str:
    """``timers/dt=<yyyy-mm-dd>/<name>.parquet`` (the day the send was stored)."""
    day = dt.datetime.fromtimestamp(stored_ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d")
    return f"{DELAYS_PREFIX}dt={day}/{name}.parquet"


def delay_tier_days(now_ms: int, last_due_ms: int, retention_hours: int) -> int:
    """The smallest tier keeping an object past its last due time plus the retention."""
    days = -(-((last_due_ms - now_ms) // 1000 + retention_hours * 3600) // 86400) + 1
    return next((t for t in DELAY_TIERS_DAYS if t >= days), DELAY_TIERS_DAYS[-1])


class DelayObjectStore:
    """Delay objects are written, read and deleted as batch objects are (immutable, written
    once); only their prefix and lifecycle tiers differ."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._objects = BatchObjectStore(client, bucket)

    def put(self, key: str, data: bytes, *, tier_days: int) -> bool:
        """Write once; False if ``key`` exists already (a retried send wrote it)."""
        return self._objects.put_tiered(key, data, tier_days=tier_days)

    def get(self, key: str) -> bytes:
        """The object's bytes; BatchObjectGone if it was deleted."""
        return self._objects.get(key)

    def delete(self, keys: list[str]) -> None:
        self._objects.delete(keys)
