"""Long runs of the model-based test (machine.py) from the command line.

    .venv/bin/python tests/reliability/model_run.py --histories 200 --seed 1

Runs ``--histories`` random histories (each up to ``--steps`` steps, then brought to rest).
When one breaks an invariant, hypothesis shrinks it and the shrunk history is printed; that
invariant is then only counted (not stopped on) and the search goes on with the next seed,
so that one run reports every kind it finds. The last line is

    histories N, steps S, faults injected F, violations V

with S and F counted over the generated histories (not the shrinking replays) and V the
number of generated histories that broke an invariant. Exits 1 when V > 0.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis.errors import Flaky  # noqa: E402
from hypothesis.internal.conjecture import engine  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from machine import ReliabilityMachine, Stats  # noqa: E402
from model import INVARIANTS, Violation  # noqa: E402
from world import Backend  # noqa: E402


class Counted(ReliabilityMachine):
    """Counts the generated histories apart from the shrinking replays."""

    shrinking = False
    generated = Stats()
    broken: set[int] = set()

    def __init__(self) -> None:
        before = len(self.stats.violations)
        super().__init__()
        self._before = before
        if not self.shrinking:
            self.generated.histories += 1
            if self.generated.histories % 10 == 0:
                g = self.generated
                print(
                    f"... {g.histories} histories, {g.steps} steps, {g.faults} faults, "
                    f"{len(self.broken)} broken",
                    file=sys.stderr,
                    flush=True,
                )

    def _after(self, what: str, fired: str | None, outcome: str, value: object) -> None:
        if not self.shrinking:
            self.generated.steps += 1
            self.generated.faults += bool(fired)
        super()._after(what, fired, outcome, value)

    def _violate(self, kind: str, detail: str) -> None:
        raised = self.raise_kinds is None or kind in self.raise_kinds
        if self.shrinking and not raised:
            return  # only the generated histories count
        if not self.shrinking:
            Counted.broken.add(self.generated.histories)
        try:
            super()._violate(kind, detail)
        except Violation:
            Counted.shrinking = True  # what runs from now on replays this history
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40, help="steps per history at most")
    parser.add_argument("--shrink-seconds", type=int, default=120, help="per violation")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # the broker logs the injected faults it survives
    engine.MAX_SHRINKING_SECONDS = args.shrink_seconds
    muted: set[str] = set()
    found: list[tuple[str, str]] = []
    attempt = 0
    started = time.monotonic()
    try:
        while Counted.generated.histories < args.histories:
            left = args.histories - Counted.generated.histories
            Counted.raise_kinds = frozenset(INVARIANTS) - muted
            Counted.shrinking = False
            config = settings(
                max_examples=left,
                stateful_step_count=args.steps,
                deadline=None,
                database=None,
                derandomize=False,
                print_blob=False,
                report_multiple_bugs=False,
                suppress_health_check=list(HealthCheck),
                phases=[Phase.generate, Phase.shrink],
            )
            try:
                run_state_machine_as_test(
                    seed(args.seed * 1000 + attempt)(Counted), settings=config
                )
            except Violation as exc:
                kind = type(exc).kind
                muted.add(kind)
                found.append((kind, str(exc)))
                print(f"\n=== violation ({kind}), shrunk history:\n{exc}\n", flush=True)
            except Flaky as exc:
                print(f"\n=== a violation that did not reproduce when shrunk: {exc!r}\n")
                muted.update(INVARIANTS)  # count the rest, stop on nothing
            attempt += 1
    finally:
        Backend.stop()
    counts = Counter(kind for kind, _ in Counted.stats.violations)
    counts.update(kind for kind, _ in found)
    seen_first: dict[str, str] = {}
    for kind, text in Counted.stats.violations:
        seen_first.setdefault(kind, text)
    for kind, text in seen_first.items():
        if kind not in {k for k, _ in found}:
            print(f"\n=== violation ({kind}), first history that showed it (not shrunk):\n{text}")
    elapsed = time.monotonic() - started
    print(f"\ninvariants broken: {dict(counts) or 'none'}; {elapsed:.0f} s")
    g = Counted.generated
    violations = len(Counted.broken)
    print(
        f"histories {g.histories}, steps {g.steps}, faults injected {g.faults}, "
        f"violations {violations}"
    )
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
