"""Consumer retries: an expired lease or a nack moves its messages to the group's retry
topic ``retry.<group>.<topic>`` at the next backoff level (or to ``dlq.<group>`` after the
last attempt), without timers or a scheduler; a receive of the topic serves them when due.

- lease_expiry.py: an expired lease goes to the retry topic (FIFO topics: redelivered in
  place, unless dead).
- retry_topic.py: moving messages to the retry topic or the DLQ; serving the due ones.
- nack.py: the consumer gives messages back now, optionally after a delay.
- settings.py: the group's ``max_delivery_attempts``.
"""

from __future__ import annotations

from .lease_expiry import MAX_MOVES_PER_PASS, LeaseExpiry
from .nack import NACK_MARGIN_SECONDS, Nacks
from .retry_topic import DueRetries, RetryTopic
from .service import RetryService
from .settings import CONFIG_CACHE_SECONDS, RetrySettings

__all__ = [
    "CONFIG_CACHE_SECONDS",
    "MAX_MOVES_PER_PASS",
    "NACK_MARGIN_SECONDS",
    "DueRetries",
    "LeaseExpiry",
    "Nacks",
    "RetryService",
    "RetrySettings",
    "RetryTopic",
]
