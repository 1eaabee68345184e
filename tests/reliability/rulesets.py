"""Narrowed rule sets of the model-based test (``--rules`` of model_run.py and
mutant_search.py): an aimed search runs only some rules of machine.py's machine, some drawn
more often.

A spec is ``name[=weight],...``: each listed rule, with ``=N`` to draw it N times as often
(hypothesis picks a rule uniformly among the enabled ones, so a rule listed N times is N
times as likely); the others are left out. ``dead_letter`` listed also lets the machine
steer histories towards dead letters (``dead_letters_aimed``). A rule of an optional rule
set (``OPTIONAL``: sqs_rules.py) listed mixes that set into the subclass; the machine's
own searches never draw its rules.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqs_rules import SqsRules

T = TypeVar("T", bound=type)
OPTIONAL: tuple[type, ...] = (SqsRules,)
"""Rule sets mixed in only by a spec that lists one of their rules."""


def weights(spec: str) -> dict[str, int]:
    """Rule name → weight, of ``spec``."""
    parsed = {}
    for part in spec.split(","):
        name, _, weight = part.strip().partition("=")
        parsed[name] = int(weight or 1)
    return parsed


def narrowed(machine: T, spec: str, **members: Any) -> T:
    """A subclass of ``machine`` with only the rules of ``spec`` enabled (``members``: more
    class attributes of it)."""
    chosen = weights(spec)
    mixins = tuple(m for m in OPTIONAL if set(chosen) & set(dir(m)))
    base = type(machine.__name__, (*mixins, machine), {}) if mixins else machine
    unknown = set(chosen) - set(dir(base))
    if unknown:
        raise SystemExit(f"unknown rules: {sorted(unknown)}")
    body: dict[str, Any] = {"dead_letters_aimed": "dead_letter" in chosen, **members}
    for name in dir(base):
        f = getattr(base, name)
        if getattr(f, "hypothesis_stateful_rule", None) is None:
            continue
        if name not in chosen:
            body[name] = _plain(f)  # not a rule in this search (still callable)
        for copy in range(1, chosen.get(name, 0)):
            body[f"{name}_x{copy}"] = f
    return type(f"Aimed{machine.__name__}", (base,), body)  # type: ignore[return-value]


def _plain(rule_method: Any) -> Any:
    """``rule_method`` as a method that is not a rule (other rules may call it)."""

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return rule_method(self, *args, **kwargs)

    return method
