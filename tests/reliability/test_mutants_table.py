"""The mutation table (mutants.py) names guards by exact snippets of the broker's code: each
must be found exactly once, so a change to a guarded write cannot leave the table behind.
And a child run past its time limit is a row of the table, which is printed whatever the
runs do (a fake runner stands for the child processes)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import mutants
import pytest
from mutants import GUARDS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("guard", GUARDS, ids=lambda g: g.name)
def test_each_guards_snippet_is_in_the_code_once(guard) -> None:
    for edit in guard.edits:
        assert (ROOT / edit.package / edit.file).read_text().count(edit.snippet) == 1, edit.file


def fake_runner(timing_out: set[str] | None, *, search_catches: bool = True):
    """A ``subprocess.run`` for mutants.py's child runs: the unmutated copy's runs answer
    at once (its tests pass, its search sees nothing), the mutant copies' runs of a guard
    named in ``timing_out`` pass their time limit, the others' catch their mutant.
    ``timing_out`` None: every run passes its limit, the unmutated copy's too;
    ``search_catches`` False: a mutant's search never catches it (its tests do)."""

    def run(command, *, cwd=None, env, timeout, **_):
        tree = Path(env["PYTHONPATH"].split(os.pathsep)[0]).parents[1]
        mutant = tree.name != "base"
        if timing_out is None or (
            mutant and any(tree.name.startswith(f"mutant-{name}-") for name in timing_out)
        ):
            raise subprocess.TimeoutExpired(command, timeout)
        broker = tree / "layers" / "broker" / "cirrusmq_broker" / "__init__.py"
        if "-c" in command:  # run_tests: pytest in-process
            failed = "FAILED tests/x.py::test_it - boom\n" if mutant else ""
            out = f"{failed}1 test\nBROKER={broker}\n"
            return subprocess.CompletedProcess(command, 1 if mutant else 0, out, "")
        catches = mutant and search_catches
        caught = {"history": 1, "kind": "lost", "detail": "", "log": ""} if catches else None
        answer = {"broker": str(broker), "histories": 1, "seconds": 0.1, "caught": caught,
                  "error": None, "seen": {}}  # fmt: skip
        return subprocess.CompletedProcess(command, 0, json.dumps(answer) + "\n", "")

    return run


ROWS = (
    mutants.Guard("slow-tests", "a guard whose test run hangs", (), tests=("tests/x.py",)),
    mutants.Guard("slow-search", "a guard whose search hangs", (), aims=(("aim", "send"),)),
    mutants.Guard("caught", "a guard its test catches", (), tests=("tests/x.py",)),
)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_past_its_time_limit_is_a_row_and_the_table_is_printed(
    monkeypatch, tmp_path, capsys, jobs
) -> None:
    monkeypatch.setattr(mutants, "GUARDS", ROWS)
    monkeypatch.setattr(mutants.subprocess, "run", fake_runner({"slow-tests", "slow-search"}))
    code = mutants.main(
        ["--timeout", "7", "--histories", "1", "--aimed-histories", "1", "--jobs", str(jobs),
         "--baseline-dir", str(tmp_path)]
    )  # fmt: skip
    out = capsys.readouterr().out
    table = out[out.index("guard | caught by") :].splitlines()
    assert code == 1
    assert table[2].startswith("slow-tests | timed out after 7 s | 0 | ")
    assert table[3].startswith("slow-search | timed out after 7 s | 0 | ")
    assert table[4].startswith("caught | test x.py::test_it (test) | 0 | ")
    assert table[-1] == (
        "1 of 3 guards caught; not caught: slow-tests, slow-search "
        "(timed out: slow-tests, slow-search)"
    )
    assert "general: timed out after 7 s" in out and "aim: timed out after 7 s" in out


def test_a_baseline_past_its_time_limit_times_out_the_guards_that_need_it(
    monkeypatch, tmp_path, capsys
) -> None:
    """The unmutated copy's run passes its limit: every guard that needs it is not caught."""
    monkeypatch.setattr(mutants, "GUARDS", ROWS)
    monkeypatch.setattr(mutants.subprocess, "run", fake_runner(None))
    code = mutants.main(["--timeout", "5", "--baseline-dir", str(tmp_path)])
    out = capsys.readouterr().out
    table = out[out.index("guard | caught by") :].splitlines()
    assert code == 1
    assert [row.split(" | ")[1] for row in table[2:5]] == ["timed out after 5 s"] * 3


def test_a_row_with_aims_and_tests_runs_its_tests_when_the_search_misses(
    monkeypatch, tmp_path, capsys
) -> None:
    both = mutants.Guard("both", "searched, then tested", (), aims=(("aim", "send"),),
                         tests=("tests/x.py",))  # fmt: skip
    monkeypatch.setattr(mutants, "GUARDS", (both,))
    monkeypatch.setattr(mutants.subprocess, "run", fake_runner(set(), search_catches=False))
    code = mutants.main(["--aimed-only", "--aimed-histories", "1", "--baseline-dir",
                         str(tmp_path)])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "    aim: survived after 1 histories" in out
    assert "both | test x.py::test_it (test) | 1 | " in out
