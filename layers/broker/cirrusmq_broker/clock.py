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


def wall_ms() -> int:
    """Milliseconds since the epoch by the wall clock (what clients sign with)."""
    return time.time_ns() // 1_000_000


def advance(seconds: float) -> None:
    """Move the broker's time forward by ``seconds`` (never backwards)."""
    global _offset_ms
    if seconds < 0:
        raise ValueError("time only moves forward")
    with _lock:
        _offset_ms += int(seconds * 1000)
    _wake_sleepers()


def offset_ms() -> int:
    """How far the broker's clock is ahead of the wall clock."""
    return _offset_ms


def reset() -> None:
    """Back to wall time (a local stack that stops)."""
    global _offset_ms
    with _lock:
        _offset_ms = 0


# ---------------------------------------------------------------- sleeping on the broker clock
# A scheduled function that works through its minute (the release of delayed messages) sleeps with
# :func:`sleep_until`. ``advance()`` wakes every sleeper (its work may be due at the new
# time) and counts it busy until it sleeps again or leaves its :func:`sleeper` block, so
# that :func:`settle` (``LocalStack.advance_time``) returns once they did their due work.

_cond = threading.Condition()
_sleepers: dict[int, int | None] = {}
"""Thread id → the broker time (ms) it sleeps until (None: awake)."""
_busy: set[int] = set()
"""Threads woken by ``advance()`` that have not slept again or left yet."""
_interrupted: set[int] = set()
_again: set[int] = set()
"""Awake sleepers an ``advance()`` happened to: their next sleep returns at once."""


class Interrupted(Exception):
    """The local stack stops: a sleeper gives up (see :func:`interrupt_sleepers`)."""


def _wake_sleepers() -> None:
    """Every registered sleeper does its work again at the new time: a sleeping one wakes,
    one at work now goes round once more before it sleeps (what it does may predate the
    advance). Both count busy until they sleep again, for :func:`settle`."""
    with _cond:
        for ident, until in _sleepers.items():
            if until is None:
                _again.add(ident)
            _sleepers[ident] = None
            _busy.add(ident)
        _cond.notify_all()


class _Sleeper:
    def __enter__(self) -> _Sleeper:
        with _cond:
            _sleepers[threading.get_ident()] = None
        return self

    def __exit__(self, *_: object) -> None:
        ident = threading.get_ident()
        with _cond:
            _sleepers.pop(ident, None)
            _busy.discard(ident)
            _interrupted.discard(ident)
            _again.discard(ident)
            _cond.notify_all()


def interrupt_sleepers() -> None:
    """Make every registered sleeper raise :class:`Interrupted` (the local stack stops)."""
    with _cond:
        _interrupted.update(_sleepers)
        _cond.notify_all()


def sleeper() -> _Sleeper:
    """``with clock.sleeper(): ... clock.sleep_until(t) ...``: registers the thread so that
    ``advance()`` wakes it and :func:`settle` waits for its work."""
    return _Sleeper()


def sleep_until(until_ms: int) -> None:
    """Sleep until the broker time is ``until_ms`` (at once when it is passed); an
    ``advance()`` wakes a registered sleeper at once."""
    ident = threading.get_ident()
    with _cond:
        if ident in _again:  # advanced while at work: go round once more, still busy
            _again.discard(ident)
            return
        _busy.discard(ident)
        registered = ident in _sleepers
        if registered:
            _sleepers[ident] = until_ms
        _cond.notify_all()
        while True:
            if ident in _interrupted:
                _interrupted.discard(ident)
                raise Interrupted()
            left = until_ms - now_ms()
            if left <= 0 or (registered and _sleepers.get(ident) is None):
                break
            _cond.wait(min(left / 1000, 1.0))
        if registered:
            _sleepers[ident] = None


def parked(ident: int) -> bool:
    """Whether thread ``ident`` sleeps in :func:`sleep_until` (not woken for work)."""
    with _cond:
        return _sleepers.get(ident) is not None and ident not in _busy


def settle(timeout: float = 30.0) -> bool:
    """Wait until every sleeper woken by ``advance()`` sleeps again or is done."""
    with _cond:
        return _cond.wait_for(lambda: not _busy, timeout)
