"""Mutation runs of the reliability harness: which broker guards does it catch?

    .venv/bin/python tests/reliability/mutants.py [--guard NAME] [--histories 30] \
        [--aimed-histories 20] [--seed 1] [--steps 30] [--baseline-dir DIR]

Each guard below is a fence, a condition or a check in ``cirrusmq_broker`` that the
reliability contract (docs/reliability.md) rests on. For each one in turn: copy the tree
(layers/, sdk/, infra/, tests/reliability/, template.yaml) into a scratch directory, remove
the guard there (each edit's snippet must occur exactly once in its file, or the run stops:
the table cannot silently rot), and search the model-based test (mutant_search.py) with the
scratch copy first on PYTHONPATH: the general search (seed, history cap), then, if it did
not catch the mutant, the guard's aimed runs (some rules only, some drawn more often).

A mutant is caught by a violation that the unmutated baseline, run on the same seed and
rules, does not show in the same history (the baseline runs first; its violations are
reported). Prints ``guard | caught by | histories needed | seconds`` and exits 1 if a guard
survives.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = "layers/broker/cirrusmq_broker"
COPIED = ("layers", "sdk", "infra", "tests/reliability", "template.yaml", "pyproject.toml")
PATHS = ("layers/broker", "layers/api", "infra", "sdk")
"""The scratch copy's package roots, first on the child's PYTHONPATH."""


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``snippet`` in ``file`` (under the broker package)."""

    file: str
    snippet: str
    replacement: str


@dataclass(frozen=True)
class Guard:
    name: str
    protects: str
    edits: tuple[Edit, ...]
    aims: tuple[tuple[str, str], ...] = ()
    """(label, rules spec of mutant_search.py --rules): runs aimed at this guard's race."""
    note: str = ""


AIMED = (
    "send,receive,ack,nack,advance,tick,cancel,txn_send,commit,redrive,rerun=2,"
    "late_ack=3,dead_letter,race_at_write=8"
)
"""The aimed run's rules: the races at guarded writes (race_at_write), late acks of
moved leases, dead letters to redrive, failed requests re-run, and the plain requests
they need. One rule set for every guard: one baseline."""
RACES = ("races at guarded writes", AIMED)
COMMIT = ("parts inside commits", "send,receive,ack,txn_send,commit,race_at_commit=6")
EXPIRY = ("lease requests inside expiry moves", "send,receive,ack,advance,race_at_expiry=6")
CORRUPT = ("an object with a row more than indexed", "send,receive,ack,advance,corrupt_object=2")

GUARDS: tuple[Guard, ...] = (
    Guard(
        "move-settle-fence",
        "an expiry or nack move commits only if the lease is still as it read it (id, version)",
        (
            Edit(
                "storage/groups/move_settles.py",
                '        condition = {\n            "ConditionExpression": lease_unchanged,\n'
                '            "ExpressionAttributeValues": to_item(as_read(before)),\n        }\n',
                "        condition: dict[str, Any] = {}\n",
            ),
        ),
        aims=(RACES, EXPIRY),
    ),
    Guard(
        "content-digest",
        "a content-named object (moves, releases) ends with a digest of its bytes: a re-run "
        "with other bytes never reuses it",
        (
            Edit(
                "services/batch_writer.py",
                '                name = f"{naming.name}{digest}"\n',
                "                name = naming.name\n",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "move-object-digest",
        "a move's batch object is content-named (stamp, moved offsets, then its bytes), "
        "not named by its stamp and offsets alone",
        (
            Edit(
                "services/moves.py",
                "            content_named(object_name_prefix(stamp, digest)),\n",
                '            __import__("dataclasses").replace(\n'
                '                content_named(object_name_prefix(stamp, digest)), kind="rows"\n'
                "            ),\n",
            ),
        ),
        aims=(RACES,),
        note="redundant: the name's prefix already names the stamp and the offsets moved, "
        "and a move's rows follow from them (defence in depth)",
    ),
    Guard(
        "fixed-name-byte-compare",
        "a commit's object under a fixed name is reused only if it holds the very bytes",
        (
            Edit(
                "storage/batch_objects.py",
                "        if self.get(key) != data:\n            raise TopicObjectTaken(key)\n",
                "        pass\n",
            ),
        ),
        aims=(RACES,),
        note="a commit's name is its transaction's: only that commit's re-run meets it, with "
        "the same half object (defence in depth)",
    ),
    Guard(
        "verifying-reader",
        "a reader takes at most an index item's count rows from its object",
        (
            Edit(
                "services/batch_reader.py",
                "    return rows[: entry.count]\n",
                "    return rows\n",
            ),
        ),
        aims=(CORRUPT,),
        note="reached only when an object's rows differ from its index count, which no "
        "writer produces while the naming guards hold (defence in depth)",
    ),
    Guard(
        "ack-moved-answer",
        "an ack's slow path answers expired (not acked) for a message its lease's expiry "
        "or a nack moved on",
        (
            Edit(
                "services/delivery/ack.py",
                "            if offset in moved:\n",
                "            if offset in moved and False:\n",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "release-taken-fence",
        "a release deletes its delay items only if they are still there: two runs (or a "
        "run and its re-run) never append the same items twice",
        (
            Edit(
                "storage/delays/items.py",
                '            condition = "attribute_exists(due_key) AND cancels = :c"\n',
                '            condition = "cancels = :c"\n',
            ),
            Edit(
                "storage/delays/items.py",
                '            condition, values = "attribute_exists(due_key) AND '
                'attribute_not_exists(cancels)", {}\n',
                '            condition, values = "attribute_not_exists(cancels)", {}\n',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "release-cancel-fence",
        "a release deletes its delay items only if no cancel changed them since it read them",
        (
            Edit(
                "storage/delays/items.py",
                "        if entry.cancels:\n"
                '            condition = "attribute_exists(due_key) AND cancels = :c"\n'
                '            values: dict[str, Any] = {"ExpressionAttributeValues": '
                'to_item({":c": entry.cancels})}\n'
                "        else:\n"
                '            condition, values = "attribute_exists(due_key) AND '
                'attribute_not_exists(cancels)", {}\n',
                '        condition, values = "attribute_exists(due_key)", {}\n',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "cancel-fence",
        "a cancel marks its delay item only if the item is still there (not released)",
        (
            Edit(
                "storage/delays/items.py",
                '                            "ConditionExpression": "attribute_exists(due_key)",\n',
                "",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "redrive-claim",
        "a redrive appends a letter only with its claim, conditional on the claims as read",
        (
            Edit(
                "storage/redrive_claims.py",
                '                "ConditionExpression": unchanged_since_read if read.version '
                "else not_yet_claimed,\n",
                "",
            ),
            Edit(
                "storage/redrive_claims.py",
                '        if read.version:\n            values[":read"]',
                '        if False:\n            values[":read"]',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "commit-parts-fence",
        "a commit starts (OPEN -> COMMITTING) only if no part landed since it read the transaction",
        (
            Edit(
                "storage/transactions.py",
                '            condition += " AND message_count = :parts_read"\n'
                '            attrs[":parts_read"] = message_count\n',
                "            pass\n",
            ),
        ),
        aims=(RACES, COMMIT),
    ),
    Guard(
        "part-open-fence",
        "a transaction part is recorded only while the transaction is OPEN",
        (
            Edit(
                "storage/transactions.py",
                '"(#state = :open AND topic = :topic AND transactional_id = :tid "',
                '"(topic = :topic AND transactional_id = :tid "',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "produce-stamp",
        "a stamped append records its stamp once (attribute_not_exists): a resend stores "
        "nothing twice",
        (
            Edit(
                "storage/producers.py",
                '                "ConditionExpression": not_yet_recorded,\n',
                "",
            ),
        ),
        aims=(RACES,),
    ),
)


@dataclass
class Outcome:
    guard: str
    caught_by: str | None = None
    run: str = ""
    histories: int = 0
    seconds: float = 0.0
    detail: str = ""
    runs: list[str] = field(default_factory=list)


def scratch_copy(into: Path, root: Path = ROOT) -> Path:
    for part in COPIED:
        source = root / part
        target = into / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def mutated(tree: Path, guard: Guard) -> dict[Path, str]:
    """The files of ``tree`` as ``guard``'s edits leave them; stops the run if a snippet
    is not found exactly once (the table is out of date)."""
    texts: dict[Path, str] = {}
    for edit in guard.edits:
        path = tree / BROKER / edit.file
        text = texts.get(path, path.read_text())
        found = text.count(edit.snippet)
        if found != 1:
            raise SystemExit(
                f"guard {guard.name}: snippet found {found} times in {edit.file} "
                f"(the table is out of date):\n{edit.snippet}"
            )
        texts[path] = text.replace(edit.snippet, edit.replacement)
    return texts


def mutate(tree: Path, guard: Guard) -> None:
    for path, text in mutated(tree, guard).items():
        path.write_text(text)


def search(
    tree: Path,
    *,
    seed: int,
    histories: int,
    steps: int,
    rules: str | None,
    baseline: Path | None,
    timeout: float,
) -> dict:
    """One mutant_search.py run on ``tree`` (its packages first on PYTHONPATH)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(tree / p) for p in PATHS)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        "nice", "-n", "10", sys.executable, str(tree / "tests/reliability/mutant_search.py"),
        "--seed", str(seed), "--histories", str(histories), "--steps", str(steps),
    ]  # fmt: skip
    command += ["--rules", rules] if rules else []
    command += ["--baseline", str(baseline)] if baseline else ["--record"]
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": True, "seconds": time.monotonic() - started}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"mutant_search.py failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if not Path(result["broker"]).is_relative_to(tree):
        raise SystemExit(f"cirrusmq_broker came from {result['broker']}, not from {tree}")
    return result


def tree_digest(root: Path) -> str:
    """Of the sources a baseline depends on: a stored baseline is reused only for them."""
    h = hashlib.sha256()
    for part in ("layers/broker", "tests/reliability"):
        for path in sorted((root / part).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


class Baselines:
    """The unmutated tree's violations per (seed, histories, steps, rules), run once."""

    def __init__(self, tree: Path, folder: Path, args: argparse.Namespace) -> None:
        self.tree, self.folder, self.args = tree, folder, args
        self.digest = tree_digest(tree)
        folder.mkdir(parents=True, exist_ok=True)

    def get(self, histories: int, rules: str | None) -> Path:
        a = self.args
        key = f"{self.digest}-s{a.seed}-h{histories}-k{a.steps}-{rules or 'all'}"
        path = self.folder / (hashlib.sha256(key.encode()).hexdigest()[:16] + ".json")
        if not path.exists():
            print(f"baseline: seed {a.seed}, {histories} histories, rules {rules or 'all'} ...",
                  flush=True)  # fmt: skip
            result = search(
                self.tree, seed=a.seed, histories=histories, steps=a.steps, rules=rules,
                baseline=None, timeout=a.timeout,
            )  # fmt: skip
            if result.get("timeout") or result.get("error"):
                raise SystemExit(f"the baseline run failed: {result.get('error') or 'timeout'}")
            result["rules"] = rules
            path.write_text(json.dumps(result))
            shown = result["seen"] or "none"
            print(f"baseline: {result['histories']} histories, {result['seconds']} s, "
                  f"violations {shown}", flush=True)  # fmt: skip
        return path


def run_guard(
    guard: Guard, pristine: Path, baselines: Baselines, args: argparse.Namespace
) -> Outcome:
    outcome = Outcome(guard.name)
    runs = [] if args.aimed_only and guard.aims else [("general", None, args.histories)]
    if not args.general_only:
        runs += [(label, rules, args.aimed_histories) for label, rules in guard.aims]
    with tempfile.TemporaryDirectory(prefix=f"mutant-{guard.name}-") as scratch:
        tree = scratch_copy(Path(scratch), pristine)
        mutate(tree, guard)
        for label, rules, histories in runs:
            baseline = baselines.get(histories, rules)
            result = search(
                tree, seed=args.seed, histories=histories, steps=args.steps, rules=rules,
                baseline=baseline, timeout=args.timeout,
            )  # fmt: skip
            outcome.seconds += result["seconds"]
            if result.get("timeout"):
                outcome.runs.append(f"{label}: timed out")
                continue
            outcome.histories += result["histories"]
            caught = result["caught"]
            outcome.runs.append(
                f"{label}: {'caught by ' + caught['kind'] if caught else 'survived'} after "
                f"{result['histories']} histories, {result['seconds']} s"
                + (f" (harness error: {result['error']})" if result.get("error") else "")
            )
            if caught:
                outcome.caught_by, outcome.run = caught["kind"], label
                outcome.detail = caught["detail"] + "\n" + caught["log"][-2500:]
                break
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--guard", action="append", help="only these guards (repeatable)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--histories", type=int, default=15, help="of the general search")
    parser.add_argument("--aimed-histories", type=int, default=20, help="of each aimed run")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--jobs", type=int, default=1, help="guards searched at once")
    parser.add_argument("--baseline-dir", default=str(Path(tempfile.gettempdir()) / "cmq-mut"))
    parser.add_argument("--general-only", action="store_true", help="no aimed runs")
    parser.add_argument("--aimed-only", action="store_true", help="only the aimed runs")
    parser.add_argument("--details", action="store_true", help="print each catch's history")
    parser.add_argument("--list", action="store_true", help="list the guards and exit")
    args = parser.parse_args(argv)
    if args.list:
        for g in GUARDS:
            print(f"{g.name}: {g.protects}")
        return 0
    chosen = [g for g in GUARDS if not args.guard or g.name in args.guard]
    unknown = set(args.guard or ()) - {g.name for g in GUARDS}
    if unknown:
        raise SystemExit(f"unknown guards: {sorted(unknown)}")
    for guard in GUARDS:  # every snippet is checked, whichever guards run
        mutated(ROOT, guard)
    with tempfile.TemporaryDirectory(prefix="mutant-baseline-") as scratch:
        # one snapshot of the tree: edits made while the run goes on do not leak into it
        pristine = scratch_copy(Path(scratch) / "base")
        baselines = Baselines(pristine, Path(args.baseline_dir), args)
        specs = set() if args.aimed_only else {(args.histories, None)}
        if not args.general_only:
            specs |= {(args.aimed_histories, rules) for g in chosen for _, rules in g.aims}
        with ThreadPoolExecutor(args.jobs) as pool:  # the baselines first, then the guards
            list(pool.map(lambda spec: baselines.get(*spec), sorted(specs, key=str)))

            def one(guard: Guard) -> Outcome:
                outcome = run_guard(guard, pristine, baselines, args)
                text = [f"--- {guard.name}: {guard.protects}"]
                text += [f"    {line}" for line in outcome.runs]
                if args.details and outcome.detail:
                    text.append(outcome.detail)
                print("\n".join(text), flush=True)
                return outcome

            outcomes = list(pool.map(one, chosen))
    print("\nguard | caught by | histories needed | seconds")
    print("---|---|---|---")
    for o, g in zip(outcomes, chosen, strict=True):
        caught = f"{o.caught_by} ({o.run})" if o.caught_by else "SURVIVED"
        note = "" if o.caught_by or not g.note else f" -- {g.note}"
        print(f"{o.guard} | {caught}{note} | {o.histories} | {o.seconds:.0f}")
    survivors = [o.guard for o in outcomes if not o.caught_by]
    print(f"\n{len(outcomes) - len(survivors)} of {len(outcomes)} guards caught"
          + (f"; survived: {', '.join(survivors)}" if survivors else ""))  # fmt: skip
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
