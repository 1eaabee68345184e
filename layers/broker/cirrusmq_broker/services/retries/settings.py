"""A group's retry settings: how many deliveries a message gets before it goes to the
group's dead-letter topic (``max_delivery_attempts``) and how an expired lease comes back
(``redelivery``), cached per container."""

from __future__ import annotations

import threading
from dataclasses import replace

from cachetools import TTLCache

from ... import limits
from ...errors import InvalidRequest
from ...rules.retries import (
    DEFAULT_MAX_DELIVERY_ATTEMPTS,
    MAX_MAX_DELIVERY_ATTEMPTS,
    MIN_MAX_DELIVERY_ATTEMPTS,
    REDELIVERIES,
    REDELIVERY_BACKOFF,
    REDELIVERY_IMMEDIATE,
)
from ...storage.group_configs import GroupConfigStore, GroupSettings
from ...validation import check_group_name

CONFIG_CACHE_SECONDS = 30
"""How long a container uses a group's settings as read (another container's change shows
within this)."""


class RetrySettings:
    def __init__(self, configs: GroupConfigStore) -> None:
        self._configs = configs
        self._cache: TTLCache[str, GroupSettings] = TTLCache(maxsize=4096, ttl=CONFIG_CACHE_SECONDS)
        self._lock = threading.Lock()

    def _settings(self, group: str, fresh: bool = False) -> GroupSettings:
        with self._lock:
            cached = None if fresh else self._cache.get(group)
        if cached is not None:
            return cached
        value = self._configs.settings(group)
        with self._lock:
            self._cache[group] = value
        return value

    def _remember(self, group: str, **changed: object) -> None:
        """Take a change this container wrote into its cached settings of ``group``."""
        with self._lock:
            current = self._cache.get(group)
            if current is not None:
                self._cache[group] = replace(current, **changed)  # type: ignore[arg-type]

    def max_delivery_attempts(self, group: str, *, fresh: bool = False) -> int:
        """Deliveries a message of ``group`` gets before the DLQ (the default if unset)."""
        value = self._settings(group, fresh).max_delivery_attempts
        return value or DEFAULT_MAX_DELIVERY_ATTEMPTS

    def set_max_delivery_attempts(self, group: str, value: int) -> int:
        check_group_name(group)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest("max_delivery_attempts must be an integer")
        if not MIN_MAX_DELIVERY_ATTEMPTS <= value <= MAX_MAX_DELIVERY_ATTEMPTS:
            raise InvalidRequest(
                f"max_delivery_attempts must be {MIN_MAX_DELIVERY_ATTEMPTS}-"
                f"{MAX_MAX_DELIVERY_ATTEMPTS}"
            )
        self._configs.set_max_delivery_attempts(group, value)
        self._remember(group, max_delivery_attempts=value)
        return value

    def redelivery(self, group: str, *, fresh: bool = False) -> str:
        """How ``group``'s expired leases come back (rules/retries.py ``REDELIVERY_*``)."""
        return self._settings(group, fresh).redelivery or REDELIVERY_BACKOFF

    def redelivers_at_once(self, group: str) -> bool:
        return self.redelivery(group) == REDELIVERY_IMMEDIATE

    def min_invisible_seconds(self, group: str) -> int:
        """The shortest invisible time a delivery of ``group`` may have."""
        return 0 if self.redelivers_at_once(group) else limits.MIN_INVISIBLE_SECONDS

    def set_redelivery(self, group: str, value: str) -> str:
        """Set how ``group``'s expired leases come back; a value it has already (as this
        container last read it) writes nothing."""
        check_group_name(group)
        if value not in REDELIVERIES:
            raise InvalidRequest(f"redelivery must be one of {', '.join(REDELIVERIES)}")
        if self.redelivery(group) != value:
            self._configs.set_redelivery(group, value)
            self._remember(group, redelivery=value)
        return value
