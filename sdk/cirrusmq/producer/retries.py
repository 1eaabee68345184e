"""When a send is tried again.

Two levels. Within one post, the transport retries a retriable failure (an unreachable
service, 5xx, throttling) by the producer's :class:`~cirrusmq.transport.RetryPolicy`
(``max_attempts``, backoff): every attempt carries the same producer id and sequence, so the
service stores the batch once. When the whole policy failed and the outbox is durable, the
batch's topic is *parked* here (:class:`ParkedTopics`): the batch stays its topic's head in
the outbox and is resent unchanged, one attempt at a time, after a growing jittered delay
(0.25 s doubling up to ``outbox_retry_max_s``); the first stored batch resumes the topic.
:class:`~cirrusmq.producer.send_state.SendState` decides what to park and what to resend.
"""

from __future__ import annotations

import random
import time
from collections.abc import Collection

from ..transport import RetryPolicy

__all__ = ["ONE_ATTEMPT", "ParkedTopics"]

ONE_ATTEMPT = RetryPolicy(max_attempts=1)
"""How a parked batch is posted: its topic's own schedule spaces the attempts."""


class ParkedTopics:
    """Topics whose head batch failed after its retry policy and waits to be resent."""

    def __init__(self, max_delay_s: float) -> None:
        self.max_delay_s = max_delay_s
        self._due: dict[str, tuple[float, int]] = {}
        """Topic -> (monotonic time of the next resend, failed resends so far)."""

    def __contains__(self, topic: object) -> bool:
        return topic in self._due

    def topics(self) -> set[str]:
        return set(self._due)

    def park(self, topic: str, *, delay_s: float | None = None) -> bool:
        """Resend ``topic`` after ``delay_s`` (default: the next jittered backoff); True when
        it was not parked before."""
        _, failures = self._due.get(topic, (0.0, 0))
        if delay_s is None:
            ceiling = min(self.max_delay_s, 0.25 * 2**failures)
            delay_s = ceiling / 2 + random.uniform(0, ceiling / 2)
        self._due[topic] = (time.monotonic() + delay_s, failures + 1)
        return failures == 0

    def postpone(self, topic: str, delay_s: float) -> None:
        """Resend ``topic`` no sooner than ``delay_s`` from now (not counted as a failure)."""
        _, failures = self._due.get(topic, (0.0, 0))
        self._due[topic] = (time.monotonic() + delay_s, failures)

    def resume(self, topic: str) -> bool:
        """``topic`` is sent normally again; True if it was parked."""
        return self._due.pop(topic, None) is not None

    def waiting(self, now: float) -> set[str]:
        """The parked topics whose resend is not due at ``now`` (monotonic)."""
        return {topic for topic, (when, _) in self._due.items() if when > now}

    def deadlines(self, *, excluding: Collection[str]) -> list[float]:
        """The monotonic times of the next resends, but of the ``excluding`` topics."""
        return [when for topic, (when, _) in self._due.items() if topic not in excluding]
