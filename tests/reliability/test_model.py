"""The model-based test in the default suite: a bounded, derandomized search of histories
(machine.py) with faults at AWS calls, two containers and changed inputs between a failure
and its re-run. Long runs: ``tests/reliability/model_run.py`` (docs/reliability.md).

One search runs per module; ``test_the_invariants_hold`` fails (with the shrunk history) on
any invariant not listed in ``KNOWN_FAILING``, and each known-failing invariant has its own
non-strict xfail test that shows the first history that broke it.
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

HISTORIES = 20
STEPS = 20
SHRINK_SECONDS = 60

KNOWN_FAILING: dict[str, str] = {}
"""Invariants today's broker breaks, with the defect they show; an entry goes once its fix
is merged (and its test below then passes)."""


@dataclass
class Search:
    error: BaseException | None = None
    stats: Stats = field(default_factory=Stats)

    def first(self, kind: str) -> str | None:
        return next((text for k, text in self.stats.violations if k == kind), None)


class SuiteMachine(ReliabilityMachine):
    raise_kinds = frozenset(INVARIANTS) - frozenset(KNOWN_FAILING)
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
    """Every invariant but the known-failing ones holds over the searched histories."""
    if search.error is not None:
        raise search.error
    assert search.stats.histories >= HISTORIES


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param(
            kind,
            marks=pytest.mark.xfail(strict=False, reason=f"invariant {kind!r}: {defect}"),
        )
        for kind, defect in KNOWN_FAILING.items()
    ]
    or [pytest.param("none", marks=pytest.mark.skip(reason="no invariant is known to fail"))],
)
def test_known_failing_invariant(search: Search, kind: str) -> None:
    """Holds once the defect behind it is fixed (then its KNOWN_FAILING entry goes)."""
    shown = search.first(kind)
    assert shown is None, shown
