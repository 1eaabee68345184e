"""What the soak's drivers share: the stack they talk to, the broker clock, the phase events
and the message budget."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from cirrusmq import Credentials


@dataclass
class Run:
    """One soak run: where the stack is, its clock, the phases, the budget."""

    endpoint: str
    credentials: Credentials
    local: Any | None
    """The ``LocalStack`` when the soak started its own (its clock is moved on)."""
    run_id: str
    max_messages: int
    max_backlog: int = 1500
    """A producer waits while this many (group, message) pairs of its protocol are unsettled."""
    stop_producing: threading.Event = field(default_factory=threading.Event)
    draining: threading.Event = field(default_factory=threading.Event)
    stop_all: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._budget = self.max_messages
        self._budget_lock = threading.Lock()

    def now_ms(self) -> int:
        """The broker's clock (the local stack's runs ahead of the wall clock)."""
        if self.local is not None:
            from cirrusmq_broker.clock import now_ms

            return now_ms()
        return time.time_ns() // 1_000_000

    def clock_offset_ms(self) -> int:
        """How far a local stack's clock was moved ahead of the wall clock: a request during
        which it did not change saw the broker clock go on with the wall clock only."""
        if self.local is not None:
            from cirrusmq_broker.clock import offset_ms

            return offset_ms()
        return 0

    def take(self, wanted: int) -> int:
        """Up to ``wanted`` messages of the budget (0 once it is spent or production ended)."""
        if self.stop_producing.is_set():
            return 0
        with self._budget_lock:
            granted = min(wanted, self._budget)
            self._budget -= granted
            return granted

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds`` unless production ends; True while producing."""
        return not self.stop_producing.wait(seconds)


POISON = "-poison"
POISON_SHARE = 0.02


def poison(rng: random.Random) -> str:
    """A body suffix that makes a few messages poison: never acked, they end dead letters."""
    return POISON if rng.random() < POISON_SHARE else ""


def is_poison(body: str | bytes) -> bool:
    return (body.decode(errors="replace") if isinstance(body, bytes) else body).endswith(POISON)


def wait_for_room(run: Run, ledger: Any) -> bool:
    """Wait while the protocol's backlog is full; False once production ends."""
    while ledger.backlog() > run.max_backlog:
        if not run.pause(0.1):
            return False
    return not run.stop_producing.is_set()
