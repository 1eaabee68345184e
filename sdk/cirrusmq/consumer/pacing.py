"""Adaptive client-side polling for an idle consumer (:class:`PollPacer`).

Every receive costs an HTTP API request, a Lambda invocation and DynamoDB reads, and a
server-side long poll keeps a Lambda running (and billed) for its whole wait. So the push
consumer receives without waiting, and after an empty receive it sleeps on its own side: an
interval that doubles from ``initial_interval_s`` up to ``max_interval_s``; a receive that
brings messages resets it. A message that arrives while the consumer is idle is therefore seen
within about ``max_interval_s``.
"""

from __future__ import annotations

__all__ = ["PollPacer"]


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
