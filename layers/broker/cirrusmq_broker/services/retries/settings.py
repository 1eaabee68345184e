"""A group's retry settings, cached per container: how many deliveries a message gets before
it is a dead letter (``max_delivery_attempts``), how an expired lease comes back
(``redelivery``), and where dead letters go (the group's dead-letter topic ``dlq.<group>``,
or a user topic set as its dead-letter destination)."""

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
from ...storage.group_configs import DeadLetterDestination, GroupConfigStore, GroupSettings
from ...validation import check_group_name, check_properties, check_topic_name

CONFIG_CACHE_SECONDS = 30
"""How long a container uses a group's settings as read (another container's change shows
within this)."""


class RetrySettings:
    def __init__(self, configs: GroupConfigStore) -> None:
        self._configs = configs
        self._cache: TTLCache[str, GroupSettings] = TTLCache(maxsize=4096, ttl=CONFIG_CACHE_SECONDS)
        self._lock = threading.Lock()

    def _read(self, group: str, fresh: bool = False) -> GroupSettings:
        """The group's settings: one read of its ``#config`` item, cached."""
        with self._lock:
            cached = None if fresh else self._cache.get(group)
        if cached is not None:
            return cached
        value = self._configs.settings(group)
        with self._lock:
            self._cache[group] = value
        return value

    def _changed(self, group: str, **changes: object) -> None:
        with self._lock:
            cached = self._cache.get(group)
            if cached is None:
                return
            self._cache[group] = replace(cached, **changes)  # type: ignore[arg-type]

    def max_delivery_attempts(self, group: str, *, fresh: bool = False) -> int:
        """Deliveries a message of ``group`` gets before the DLQ (the default if unset)."""
        return self._read(group, fresh).max_delivery_attempts or DEFAULT_MAX_DELIVERY_ATTEMPTS

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
        self._changed(group, max_delivery_attempts=value)
        return value

    def redelivery(self, group: str, *, fresh: bool = False) -> str:
        """How ``group``'s expired leases come back (rules/retries.py ``REDELIVERY_*``)."""
        return self._read(group, fresh).redelivery or REDELIVERY_BACKOFF

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
            self._changed(group, redelivery=value)
        return value

    def dead_letter_destination(self, group: str) -> DeadLetterDestination | None:
        """The topic ``group``'s dead letters go to instead of ``dlq.<group>`` (None: none)."""
        return self._read(group).dead_letter

    def set_dead_letter_destination(
        self, group: str, topic: str | None, properties: dict[str, str] | None = None
    ) -> None:
        """Send ``group``'s dead letters to the user topic ``topic``, each with
        ``properties`` added (None: to its dead-letter topic ``dlq.<group>``)."""
        check_group_name(group)
        destination = None
        if topic is not None:
            check_topic_name(topic)
            destination = DeadLetterDestination(topic, check_properties(dict(properties or {})))
        self._configs.set_dead_letter_destination(group, destination)
        self._changed(group, dead_letter=destination)
