"""Adaptive client-side polling for an idle consumer (:class:`PollPacer`).

Every receive costs an HTTP API request, a Lambda invocation and DynamoDB reads, and a
server-side long poll keeps a Lambda running (and billed) for its whole wait. So the push
consumer receives without waiting, and after an empty receive it sleeps on its own side: an
interval that doubles from ``initial_interval_s`` up to ``max_interval_s``; a receive that
brings messages resets it. A message that arrives while the consumer is idle is therefore seen
within about ``max_interval_s``. Once that interval reaches :data:`CHANNEL_AFTER_S`,
:class:`IdleWait` waits on the notification channel instead (when the service has one):
the consumer is woken by a "look now" and polls only every few minutes meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["CHANNEL_AFTER_S", "IdleWait", "PollPacer"]


class PollPacer:
    """How long to wait before the next receive, given what the last one brought.

    Pure bookkeeping (no clock, no sleeping): the caller waits the returned delay, e.g. on a
    ``threading.Event`` so that a shutdown interrupts it.
    """

    def __init__(self, *, initial_interval_s: float = 0.05, max_interval_s: float = 10.0) -> None:
        if initial_interval_s <= 0 or max_interval_s < initial_interval_s:
            raise ValueError("need 0 < initial_interval_s <= max_interval_s")
        self.initial_interval_s = initial_interval_s
        self.max_interval_s = max_interval_s
        self._next_s = initial_interval_s

    def after_receive(self, received: int) -> float:
        """Seconds to wait before the next receive: 0 after messages (and the interval starts
        over), else the current interval (which then doubles, up to ``max_interval_s``)."""
        if received:
            self._next_s = self.initial_interval_s
            return 0.0
        delay = self._next_s
        self._next_s = min(self._next_s * 2, self.max_interval_s)
        return delay

    def reset(self) -> None:
        """Start over from ``initial_interval_s``."""
        self._next_s = self.initial_interval_s


CHANNEL_AFTER_S = 1.0
"""A consumer waits on the notification channel once its polling interval reached this (about
1.5 s of empty receives): a consumer that is only briefly idle does not register."""


DUE_SLACK_S = 1.0
"""A wait for something due (:meth:`IdleWait.expect_at`) ends this long after it."""


class IdleWait:
    """The idle wait of a consumer: ``wait(delay)`` returns True when ``event`` is set (a
    notification, an orderly queue freed, a shutdown), False when the time is up.

    With a notification channel (``channel`` makes it on first need, see :mod:`.channel`)
    and a delay of at least :data:`CHANNEL_AFTER_S`, the consumer stops polling: it
    registers its (group, topics), receives once more at once (what arrived before the
    registration), then waits on the channel up to :data:`~.channel.SAFETY_POLL_S`.
    Without a channel, or while it is unavailable or refused the registration, it waits
    ``delay`` (the adaptive polling).
    """

    def __init__(
        self,
        event: Any,
        *,
        channel: Callable[[], Any] | None = None,
        group: str = "",
        topics: Callable[[], list[str]] | None = None,
    ) -> None:
        self.event = event
        self._channel_factory = channel
        self._channel: Any = None
        self._group = group
        self._topics = topics or (lambda: [])
        self._waiter: Any = None
        self._due: float | None = None
        self.channel_waits = 0
        """Waits spent on the channel (tests: the consumer slept there, not polling)."""

    @property
    def waiter(self) -> Any:
        return self._waiter

    def expect_at(self, when: float) -> None:
        """Something no notification announces is due at ``when`` (``time.monotonic()``):
        a message this consumer gave back comes back after its backoff (a nack appends it
        to the retry topic at once, due later), or what an empty receive's ``next_due_ms``
        names (another consumer's lease ends, a retry's backoff passes). A channel wait
        ends by then."""
        self._due = when if self._due is None else min(self._due, when)

    def usable(self) -> bool:
        """Whether the channel can be waited on now (a waiter not refused, a channel that
        did not just fail to connect)."""
        waiter = self._current_waiter()
        return waiter is not None and waiter.refused is None and waiter.channel.healthy

    def wait(self, delay: float, *, max_s: float | None = None) -> bool:
        """``max_s``: the longest wait on the channel (default: the safety poll)."""
        waiter = self._current_waiter() if delay >= CHANNEL_AFTER_S else None
        if waiter is None or waiter.refused is not None:
            return bool(self.event.wait(delay))
        if not waiter.registered:
            if not waiter.register():
                return bool(self.event.wait(delay))  # unavailable: poll
            return False  # registered: one more receive finds what came before it
        self.channel_waits += 1
        from .channel import SAFETY_POLL_S

        limit = SAFETY_POLL_S if max_s is None else min(SAFETY_POLL_S, max_s)
        due = self._due
        if due is not None:
            limit = min(limit, max(0.0, due + DUE_SLACK_S - time.monotonic()))
        woken = bool(self.event.wait(limit))
        if due is not None and time.monotonic() >= due + DUE_SLACK_S and self._due == due:
            self._due = None
        return woken or not waiter.registered

    def _current_waiter(self) -> Any:
        if self._channel is None and self._channel_factory is not None:
            self._channel, self._channel_factory = self._channel_factory(), None
        if self._channel is None:
            return None
        topics = tuple(sorted(set(self._topics())))
        if self._waiter is None or self._waiter.topics != topics:
            if self._waiter is not None:
                self._waiter.close()
            self._waiter = self._channel.waiter(self._group, topics, self.event)
        return self._waiter

    def close(self) -> None:
        if self._waiter is not None:
            self._waiter.close()
            self._waiter = None
