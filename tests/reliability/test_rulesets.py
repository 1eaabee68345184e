"""Aimed searches (rulesets.py, ``--rules`` of model_run.py and mutant_search.py): a spec
enables only the rules it lists, each as often as its weight says."""

from __future__ import annotations

import re
from collections import Counter

import model_run
import pytest
from machine import ReliabilityMachine
from rulesets import narrowed


def enabled(machine: type) -> Counter[str]:
    """Rule name (copies counted under the rule's own name) → how many times it is a rule."""
    rules = Counter[str]()
    for name in dir(machine):
        f = getattr(machine, name)
        if getattr(f, "hypothesis_stateful_rule", None) is not None:
            rules[re.sub(r"_x\d+$", "", name)] += 1
    return rules


def test_a_spec_enables_its_rules_only_each_by_its_weight() -> None:
    machine = narrowed(ReliabilityMachine, "mv_send,mv_move,race_at_move=4")
    assert enabled(machine) == {"mv_send": 1, "mv_move": 1, "race_at_move": 4}
    assert not machine.dead_letters_aimed
    assert issubclass(machine, ReliabilityMachine)


def test_a_rule_left_out_stays_callable_and_dead_letter_aims_dead_letters() -> None:
    machine = narrowed(ReliabilityMachine, "send,dead_letter")
    assert enabled(machine) == {"send": 1, "dead_letter": 1}
    assert machine.dead_letters_aimed
    assert callable(machine.receive) and not hasattr(machine.receive, "hypothesis_stateful_rule")


def test_an_unknown_rule_stops_the_run() -> None:
    with pytest.raises(SystemExit, match="unknown rules"):
        narrowed(ReliabilityMachine, "send,no_such_rule")


def test_model_run_replays_with_its_rules() -> None:
    args = model_run.argparse.Namespace(
        seed=3, histories=4, steps=5, workers=1, rules="mv_send,race_at_move=4"
    )
    assert model_run.replay(args, None).endswith("--rules mv_send,race_at_move=4")


def test_a_spec_with_sqs_rules_mixes_them_in_and_the_machine_alone_has_none() -> None:
    machine = narrowed(ReliabilityMachine, "sqs_send=3,sqs_purge,tick")
    assert enabled(machine) == {"sqs_send": 3, "sqs_purge": 1, "tick": 1}
    assert not any(name.startswith("sqs_") for name in enabled(ReliabilityMachine))
