"""Long runs of the model-based test (machine.py) from the command line.

    .venv/bin/python tests/reliability/model_run.py --histories 300 --steps 30 --workers 2
    .venv/bin/python tests/reliability/model_run.py --rules mv_send,mv_receive,race_at_move=4

Runs ``--histories`` random histories (each up to ``--steps`` steps, then brought to rest).
When one breaks an invariant, hypothesis shrinks it and the shrunk history is printed; that
invariant is then only counted (not stopped on) and the search goes on with the next seed,
so that one run reports every kind it finds.

``--workers N`` runs the histories in N processes, each its own share of them and its own
seed stream (worker 0's is the one a single process runs). Without ``--seed`` a fresh seed
is drawn; it is printed first and last, with the options that replay the same histories
(``--worker W`` runs only worker W's share, in this process). The last line is

    histories N, steps S, faults injected F, violations V, H histories/min

with S and F counted over the generated histories (not the shrinking replays), V the number
of generated histories that broke an invariant and H the histories per minute of wall time.
Exits 1 when V > 0.

``--rules`` runs an aimed search (rulesets.py): only the rules listed, ``=N`` drawing one
N times as often.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis.errors import Flaky  # noqa: E402
from hypothesis.internal.conjecture import engine  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402
from machine import ReliabilityMachine, Stats  # noqa: E402
from model import INVARIANTS, Violation  # noqa: E402
from rulesets import narrowed  # noqa: E402
from world import Backend  # noqa: E402

WORKER_STREAM = 10**15
"""Worker w's hypothesis seeds are worker 0's plus w times this (seeds below 10**12 keep the
streams apart)."""
_print_lock: Any = None
"""Shared by the workers: one report printed at a time."""


class Counted(ReliabilityMachine):
    """Counts the generated histories apart from the shrinking replays."""

    shrinking = False
    generated = Stats()
    broken: set[int] = set()
    label = ""
    """The worker, in progress lines (several workers)."""

    def __init__(self) -> None:
        before = len(self.stats.violations)
        super().__init__()
        self._before = before
        if not self.shrinking:
            self.generated.histories += 1
            if self.generated.histories % 10 == 0:
                g = self.generated
                print(
                    f"...{self.label} {g.histories} histories, {g.steps} steps, "
                    f"{g.faults} faults, {len(self.broken)} broken",
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


@dataclass
class Outcome:
    """What one worker's search found."""

    histories: int = 0
    steps: int = 0
    faults: int = 0
    broken: int = 0
    found: list[tuple[str, str]] = field(default_factory=list)
    """(kind, shrunk history) of each kind it stopped on."""
    muted: list[tuple[str, str]] = field(default_factory=list)
    """(kind, history) of violations of kinds already found (not shrunk)."""


def share(histories: int, workers: int, worker: int) -> int:
    """Worker ``worker``'s share of ``histories``."""
    return histories // workers + (1 if worker < histories % workers else 0)


def search(args: argparse.Namespace, worker: int) -> Outcome:
    """Worker ``worker``'s histories: its share, on its seed stream."""
    logging.disable(logging.CRITICAL)  # the broker logs the injected faults it survives
    engine.MAX_SHRINKING_SECONDS = args.shrink_seconds
    histories = share(args.histories, args.workers, worker)
    tag = f" (worker {worker}; alone: {replay(args, worker)})" if args.workers > 1 else ""
    Counted.label = f" [worker {worker}]" if args.workers > 1 else ""
    muted: set[str] = set()
    outcome = Outcome()
    machine = narrowed(Counted, args.rules) if args.rules else Counted
    attempt = 0
    try:
        while Counted.generated.histories < histories:
            left = histories - Counted.generated.histories
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
            stream = args.seed * 1000 + attempt + worker * WORKER_STREAM
            try:
                run_state_machine_as_test(seed(stream)(machine), settings=config)
            except Violation as exc:
                kind = type(exc).kind
                muted.add(kind)
                outcome.found.append((kind, str(exc)))
                _report(f"\n=== violation ({kind}), shrunk history{tag}:\n{exc}\n")
            except Flaky as exc:
                _report(f"\n=== a violation that did not reproduce when shrunk{tag}: {exc!r}\n")
                muted.update(INVARIANTS)  # count the rest, stop on nothing
            attempt += 1
    finally:
        Backend.stop()
    g = Counted.generated
    outcome.histories, outcome.steps, outcome.faults = g.histories, g.steps, g.faults
    outcome.broken = len(Counted.broken)
    outcome.muted = list(Counted.stats.violations)
    return outcome


def _report(text: str) -> None:
    if _print_lock is None:
        print(text, flush=True)
        return
    with _print_lock:
        print(text, flush=True)


def _share_lock(lock: Any) -> None:
    global _print_lock
    _print_lock = lock


def _search_in_worker(job: tuple[argparse.Namespace, int]) -> Outcome:
    return search(*job)


def replay(args: argparse.Namespace, worker: int | None) -> str:
    """The options that run the same histories again (``worker``: only its share)."""
    options = (
        f"--seed {args.seed} --histories {args.histories} --steps {args.steps} "
        f"--workers {args.workers}"
    ) + (f" --rules {args.rules}" if args.rules else "")
    return options if worker is None else f"{options} --worker {worker}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--histories", type=int, default=100)
    parser.add_argument("--seed", type=int, default=None, help="default: a fresh one (printed)")
    parser.add_argument("--steps", type=int, default=40, help="steps per history at most")
    parser.add_argument("--shrink-seconds", type=int, default=120, help="per violation")
    parser.add_argument("--workers", type=int, default=1, help="processes (one per core)")
    parser.add_argument(
        "--worker", type=int, default=None, help="run only this worker's share, here"
    )
    parser.add_argument("--rules", help="an aimed search: name[=weight],... (rulesets.py)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(10**9)
    if args.workers < 1 or not (args.worker is None or 0 <= args.worker < args.workers):
        parser.error("--workers must be at least 1, --worker one of them")
    print(f"seed {args.seed} (replay: {replay(args, args.worker)})", flush=True)
    started = time.monotonic()
    if args.worker is not None:
        outcomes = [search(args, args.worker)]
    elif args.workers == 1:
        outcomes = [search(args, 0)]
    else:
        context = multiprocessing.get_context("fork")
        with context.Pool(args.workers, _share_lock, (context.Lock(),)) as pool:
            outcomes = pool.map(_search_in_worker, [(args, w) for w in range(args.workers)])
    elapsed = time.monotonic() - started
    found = [f for outcome in outcomes for f in outcome.found]
    counts = Counter(kind for outcome in outcomes for kind, _ in outcome.muted)
    counts.update(kind for kind, _ in found)
    seen_first: dict[str, str] = {}
    for outcome in outcomes:
        for kind, text in outcome.muted:
            seen_first.setdefault(kind, text)
    for kind, text in seen_first.items():
        if kind not in {k for k, _ in found}:
            print(f"\n=== violation ({kind}), first history that showed it (not shrunk):\n{text}")
    histories = sum(outcome.histories for outcome in outcomes)
    violations = sum(outcome.broken for outcome in outcomes)
    print(
        f"\ninvariants broken: {dict(counts) or 'none'}; {elapsed:.0f} s; "
        f"seed {args.seed} (replay: {replay(args, args.worker)})"
    )
    print(
        f"histories {histories}, steps {sum(o.steps for o in outcomes)}, "
        f"faults injected {sum(o.faults for o in outcomes)}, violations {violations}, "
        f"{histories / elapsed * 60:.1f} histories/min"
    )
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
