"""The model-based test in the default suite: a bounded, derandomized search of histories
(machine.py) with faults at AWS calls, two containers and changed inputs between a failure
and its re-run. Long runs: ``tests/reliability/model_run.py`` (docs/reliability.md).

One search runs per module; ``test_the_invariants_hold`` fails (with the shrunk history) on
any invariant broken.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import run_state_machine_as_test
from machine import ReliabilityMachine, Stats
from model import INVARIANTS, Violation
from world import Backend

pytestmark = pytest.mark.reliability

HISTORIES = 30
STEPS = 20
SHRINK_SECONDS = 60


@dataclass
class Search:
    error: BaseException | None = None
    stats: Stats = field(default_factory=Stats)


class SuiteMachine(ReliabilityMachine):
    raise_kinds = frozenset(INVARIANTS)
    stats = Stats()


@pytest.fixture(scope="module")
def search() -> Iterator[Search]:
    logging.disable(logging.CRITICAL)  # the broker logs the injected faults it survives
    shrink_seconds, engine.MAX_SHRINKING_SECONDS = engine.MAX_SHRINKING_SECONDS, SHRINK_SECONDS
    found = Search(stats=SuiteMachine.stats)
    config = settings(
        max_examples=HISTORIES,
        stateful_step_count=STEPS,
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
    )
    try:
        run_state_machine_as_test(SuiteMachine, settings=config)
    except Violation as exc:
        found.error = exc
    finally:
        Backend.stop()
        logging.disable(logging.NOTSET)
        engine.MAX_SHRINKING_SECONDS = shrink_seconds
    yield found


def test_the_invariants_hold(search: Search) -> None:
    """Every invariant holds over the searched histories."""
    if search.error is not None:
        raise search.error
    assert search.stats.histories >= HISTORIES
