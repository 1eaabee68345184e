"""The mutation table (mutants.py) names guards by exact snippets of the broker's code: each
must be found exactly once, so a change to a guarded write cannot leave the table behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from mutants import GUARDS

BROKER = Path(__file__).resolve().parents[2] / "layers" / "broker" / "cirrusmq_broker"


@pytest.mark.parametrize("guard", GUARDS, ids=lambda g: g.name)
def test_each_guards_snippet_is_in_the_code_once(guard) -> None:
    for edit in guard.edits:
        assert (BROKER / edit.file).read_text().count(edit.snippet) == 1, edit.file
