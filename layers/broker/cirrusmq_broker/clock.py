"""The broker's clock: wall time plus an offset that only the local stack moves.

Every time the broker reasons about (leases, retention, TTL, delays, orphan ages) comes from
:func:`now_ms`. ``LocalStack.advance_time()`` calls :func:`advance` so that tests and users
can check retention or invisibility without waiting; on AWS the offset stays 0.
"""

from __future__ import annotations

import threading
import time

_lock = threading.Lock()
_offset_ms = 0


def now_ms() -> int:
    """Milliseconds since the epoch, as the broker sees them."""
    return time.time_ns() // 1_000_000 + _offset_ms


def advance(seconds: float) -> None:
    """Move the broker's time forward by ``seconds`` (never backwards)."""
    global _offset_ms
    if seconds < 0:
        raise ValueError("time only moves forward")
    with _lock:
        _offset_ms += int(seconds * 1000)


def offset_ms() -> int:
    """How far the broker's clock is ahead of the wall clock."""
    return _offset_ms


def reset() -> None:
    """Back to wall time (a local stack that stops)."""
    global _offset_ms
    with _lock:
        _offset_ms = 0
