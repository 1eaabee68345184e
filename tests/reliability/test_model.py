"""The model-based test in the default suite: a bounded search of histories (machine.py)
with faults at AWS calls, two containers and changed inputs between a failure and its
re-run, on fixed seeds. Long runs: ``tests/reliability/model_run.py`` (docs/reliability.md).

The search's 30 histories run as 10 tests of 3, each on its own fixed seed, so that each
test's time limit covers a tenth of the search (a history costs several seconds of CPU,
most of it in moto's request handling; on a loaded machine one test of all 30 did not end
within it). A last test runs 3 histories of the SQS standard-queue aim (mutants.py's
``SQS_STANDARD``). The moto backend is built once for the module. A test fails (with the
shrunk history) on any invariant broken.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import run_state_machine_as_test
from machine import ReliabilityMachine, Stats
from model import INVARIANTS
from mutants import SQS_STANDARD
from rulesets import narrowed
from world import Backend

pytestmark = pytest.mark.reliability

HISTORIES = 30
SHARES = 10
"""Tests the search is split into, each its own seed (share number) and a tenth of it."""
STEPS = 20
SHRINK_SECONDS = 60


class SuiteMachine(ReliabilityMachine):
    raise_kinds = frozenset(INVARIANTS)
    stats = Stats()


@pytest.fixture(scope="module")
def backend() -> Iterator[None]:
    """One moto backend for every share (each history starts on it emptied)."""
    logging.disable(logging.CRITICAL)  # the broker logs the injected faults it survives
    shrink_seconds, engine.MAX_SHRINKING_SECONDS = engine.MAX_SHRINKING_SECONDS, SHRINK_SECONDS
    try:
        yield
    finally:
        Backend.stop()
        logging.disable(logging.NOTSET)
        engine.MAX_SHRINKING_SECONDS = shrink_seconds


@pytest.mark.parametrize("share", range(SHARES))
def test_the_invariants_hold(backend: None, share: int) -> None:
    """Every invariant holds over this share's histories."""
    config = _search(HISTORIES // SHARES)
    before = SuiteMachine.stats.histories
    run_state_machine_as_test(seed(share)(SuiteMachine), settings=config)
    assert SuiteMachine.stats.histories - before >= HISTORIES // SHARES


def test_the_invariants_hold_on_an_sqs_standard_queue(backend: None) -> None:
    """The SQS standard-queue visibility rules (sqs_standard_rules.py: peeks, expiries
    redelivered in place, deletes and changes through older handles), a few histories."""
    machine = narrowed(SuiteMachine, SQS_STANDARD[1])
    run_state_machine_as_test(seed(SHARES)(machine), settings=_search(3))


def _search(histories: int) -> settings:
    return settings(
        max_examples=histories,
        stateful_step_count=STEPS,
        derandomize=False,
        database=None,
        deadline=None,
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate, Phase.shrink],
    )
