"""docs/deploy.md describes what template.yaml creates: the counts it states, the resources it
names and the outputs it lists are the template's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from cirrusmq_local.cfn_yaml import load_yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "deploy.md").read_text()
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
NUMBERS |= {"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}


def _resources(kind: str) -> list[str]:
    template = load_yaml(ROOT / "template.yaml")
    return [name for name, r in template["Resources"].items() if r["Type"] == kind]


def _schedules() -> list[tuple[str, str, str]]:
    template = load_yaml(ROOT / "template.yaml")
    found = []
    for name in _resources("AWS::Serverless::Function"):
        events: dict[str, Any] = template["Resources"][name]["Properties"].get("Events") or {}
        for event, spec in events.items():
            if spec["Type"] == "Schedule":
                found.append((name, event, spec["Properties"]["Schedule"]))
    return found


def _stated(what: str) -> list[int]:
    """Every count the doc states as '<number word> <what>' (e.g. 'seven Lambda functions')."""
    pattern = rf"\b({'|'.join(NUMBERS)})\s+{what}"
    return [NUMBERS[m.lower()] for m in re.findall(pattern, DOC, flags=re.I)]


def _table_row(kind: str) -> tuple[int, str]:
    match = re.search(rf"^\| {kind} \((\d+)\) \| (.*) \|$", DOC, flags=re.M)
    assert match, f"no '{kind} (N)' row in the 'What the template creates' table"
    return int(match[1]), match[2]


def test_the_counts_in_the_text_are_the_templates() -> None:
    functions = _resources("AWS::Serverless::Function")
    tables = _resources("AWS::DynamoDB::Table")
    layers = _resources("AWS::Serverless::LayerVersion")
    assert _stated(r"(?:Lambda\s+)?functions") == [len(functions)]
    assert _stated(r"(?:DynamoDB\s+)?tables") == [len(tables)]
    assert _stated(r"schedules") == [len(_schedules())]
    assert _stated(r"layers") == [len(layers)]
    assert _stated(r"handlers") == [len(functions)]


def test_the_resource_table_names_every_function_table_and_schedule() -> None:
    for kind, names in (
        ("Lambda functions", _resources("AWS::Serverless::Function")),
        ("DynamoDB tables", _resources("AWS::DynamoDB::Table")),
        ("layers", _resources("AWS::Serverless::LayerVersion")),
    ):
        count, row = _table_row(kind)
        assert count == len(names), kind
        assert sorted(re.findall(r"`(\w+(?:Function|Table|Layer))`", row)) == sorted(names), kind
    count, row = _table_row("schedules")
    assert count == len(_schedules())
    for function, event, rate in _schedules():
        assert re.search(rf"`{function}`:[^;]*`{event}` {re.escape(rate)}", row), (event, row)


def test_the_outputs_table_lists_every_output() -> None:
    outputs = load_yaml(ROOT / "template.yaml")["Outputs"]
    section = DOC.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`(\w+)`", "".join(re.findall(r"^\| ([^|]+) \|", section, re.M))))
    assert listed - {"output"} == set(outputs)
