"""Optimistic updates: read, apply a rule, save on condition that nothing changed since the
read; on a lost race read again, a bounded number of times.

Each caller writes one ``step``: it reads what it changes, applies its rule and saves
conditionally, then answers the outcome, or :data:`CONFLICT` when the save lost a race
(the helper then runs the step again, after a short random backoff if asked). Errors a
step raises end the update at once.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Final, NoReturn, TypeVar

from ..errors import Busy

T = TypeVar("T")

SAVE_ATTEMPTS = 6
"""Attempts an update makes before it gives up (every one lost a race)."""


class Conflict:
    def __repr__(self) -> str:
        return "CONFLICT"


CONFLICT: Final = Conflict()
"""What a step answers when its conditional save lost a race: read again."""


def update(
    step: Callable[[int], T | Conflict],
    *,
    exhausted: Callable[[], T],
    attempts: int = SAVE_ATTEMPTS,
    backoff: bool = False,
) -> T:
    """Run ``step(attempt)`` (0, 1, ...) until it answers something other than
    :data:`CONFLICT`, at most ``attempts`` times; then ``exhausted()`` answers (or raises).
    ``backoff``: sleep a random 0-10 ms times the attempt number after each lost race, so
    writers that collided do not collide again in lockstep."""
    for attempt in range(attempts):
        outcome = step(attempt)
        if not isinstance(outcome, Conflict):
            return outcome
        if backoff:
            time.sleep(random.uniform(0, 0.01 * (attempt + 1)))
    return exhausted()


def busy(message: str) -> Callable[[], NoReturn]:
    """An ``exhausted`` that raises Busy(``message``): the caller should retry later."""

    def give_up() -> NoReturn:
        raise Busy(message)

    return give_up
