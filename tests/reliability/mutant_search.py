"""One bounded search of the model-based test for mutants.py (run in a subprocess).

    python tests/reliability/mutant_search.py --seed 1 --histories 40 --steps 30 \
        [--record] [--baseline FILE] [--rules race_at_write=4,advance,receive]

Runs up to ``--histories`` generated histories of machine.py (seed ``--seed``, no
shrinking). A violation never stops a history here: every one is recorded as (history
number, invariant). With ``--record`` (the unmutated baseline) the search runs to its
end; otherwise it stops at the first violation that the baseline file (``--baseline``,
written by a ``--record`` run on the same seed) does not show in the same history.

``--rules`` narrows the search to some rules (an aimed run, rulesets.py): each listed
rule, with ``=N`` to draw it N times as often; the others are left out.

Prints one JSON line: where ``cirrusmq_broker`` was imported from, histories run, seconds,
the first counted violation (``caught``: history, invariant, detail) or null, and every
violation recorded (history → invariants).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dataclasses  # noqa: E402

import cirrusmq_broker  # noqa: E402
from cirrusmq_broker.codec import decode_batch, encode_batch  # noqa: E402
from cirrusmq_broker.storage.clients import aws_client  # noqa: E402
from hypothesis import HealthCheck, Phase, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import precondition, rule, run_state_machine_as_test  # noqa: E402
from machine import ReliabilityMachine  # noqa: E402
from rulesets import narrowed, weights  # noqa: E402
from world import Backend  # noqa: E402


class Search(ReliabilityMachine):
    """Records every violation by history; stops the process at the first one the
    baseline does not show."""

    raise_kinds: ClassVar[frozenset[str] | None] = frozenset()
    histories = 0
    started = 0.0
    baseline: ClassVar[dict[int, set[str]] | None] = None
    seen: ClassVar[dict[int, list[str]]] = {}

    corrupting: ClassVar[bool] = False
    """Whether ``corrupt_object`` runs (only in a run aimed at it)."""

    def __init__(self) -> None:
        Search.histories += 1
        super().__init__()

    @precondition(lambda self: self.corrupting)
    @rule(p=st.integers(0, 63))
    def corrupt_object(self, p: int) -> None:
        """A batch object of topic n rewritten with one row more than its index item
        counts: the corruption a verifying reader must not pass on (no writer makes it
        while the naming guards hold)."""
        s3 = aws_client("s3", self.world.settings)
        bucket = self.world.settings.batch_bucket or self.world.settings.bucket
        listed = s3.list_objects_v2(Bucket=bucket, Prefix="topics/topic=n/")
        keys = sorted(o["Key"] for o in listed.get("Contents", []))
        if not keys:
            return
        key = keys[p % len(keys)]
        rows = decode_batch(s3.get_object(Bucket=bucket, Key=key)["Body"].read(), topic="n",
                            queue=0, base_offset=0)  # fmt: skip
        if not rows:
            return
        extra = dataclasses.replace(rows[0].as_new(), message_id=f"x-{p}", body=b"x-corrupt")
        data = encode_batch(
            [r.as_new() for r in rows] + [extra],
            stored_timestamp=rows[0].stored_timestamp,
            stamp=None,
        )
        s3.put_object(Bucket=bucket, Key=key, Body=data)
        self.log.append(f"object {key.rsplit('/', 1)[-1]} rewritten: one row more than indexed")

    def _violate(self, kind: str, detail: str) -> None:
        history = Search.histories
        kinds = Search.seen.setdefault(history, [])
        if kind not in kinds:
            kinds.append(kind)
        if Search.baseline is not None and kind not in Search.baseline.get(history, set()):
            log = "\n".join(f"  {i:3}. {line}" for i, line in enumerate(self.log))
            report(
                caught={
                    "history": history,
                    "kind": kind,
                    "detail": detail[:600],
                    "log": log[-6000:],
                }
            )
            os._exit(0)  # nothing else to learn from this run
        super()._violate(kind, detail)


def report(caught: dict[str, Any] | None, error: str | None = None) -> None:
    print(
        json.dumps(
            {
                "broker": cirrusmq_broker.__file__,
                "histories": Search.histories,
                "seconds": round(time.monotonic() - Search.started, 1),
                "caught": caught,
                "error": error,
                "seen": {str(h): k for h, k in Search.seen.items()},
            }
        ),
        flush=True,
    )


def aimed(spec: str) -> type[Search]:
    """A subclass with only the rules of ``spec`` (``name[=weight],...``) enabled."""
    return narrowed(Search, spec, corrupting="corrupt_object" in weights(spec))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--histories", type=int, default=40)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--record", action="store_true", help="the baseline: run to the end")
    parser.add_argument("--baseline", help="JSON written by a --record run (its 'seen')")
    parser.add_argument("--rules", help="an aimed run: name[=weight],...")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)
    if not args.record:
        seen = json.loads(Path(args.baseline).read_text())["seen"] if args.baseline else {}
        Search.baseline = {int(h): set(kinds) for h, kinds in seen.items()}
    machine = aimed(args.rules) if args.rules else Search
    config = settings(
        max_examples=args.histories,
        stateful_step_count=args.steps,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    Search.started = time.monotonic()
    error = None
    try:
        run_state_machine_as_test(seed(args.seed)(machine), settings=config)
    except Exception as exc:  # noqa: BLE001 - the harness itself failed: reported
        error = f"{type(exc).__name__}: {str(exc)[:400]}"
    finally:
        Backend.stop()
    report(None, error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
