"""The SQL92 filter's expression tree and its evaluation over a message's properties.

Evaluation follows RocketMQ's filter module (org.apache.rocketmq.filter.expression):
- a value is None (a missing property, NULL), a bool, a number or a string; every property
  is a string, and ``TAGS`` is the message's tag;
- logic is three-valued: a comparison with a missing operand is unknown (None), ``AND``,
  ``OR`` and ``NOT`` treat unknown as SQL does, and a message matches only when the whole
  expression is TRUE;
- a string compared with a number is read as a number, with a boolean as ``'true'`` (any
  case) or not; two strings are ordered (``> >= < <=``) as numbers;
- a string that cannot be read so makes the whole expression fail to match (RocketMQ's
  evaluation throws, and its broker treats that as no match): :class:`Unmatchable`;
- ``IN`` needs a string value; ``CONTAINS``/``STARTSWITH``/``ENDSWITH`` and their ``NOT``
  forms are FALSE for a missing or empty operand.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

Value = None | bool | int | float | str
Lookup = Callable[[str], "str | None"]

_MAX_INTEGER_DIGITS = 400
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)


class Unmatchable(Exception):
    """A string could not be read as the number or boolean it is compared with."""


# precedence levels, loosest first: how the canonical text decides where parentheses go
OR_LEVEL, AND_LEVEL, EQUALITY_LEVEL, COMPARISON_LEVEL, UNARY_LEVEL, PRIMARY_LEVEL = range(6)


@dataclass(frozen=True)
class Node:
    position: int = field(default=0, compare=False, kw_only=True)
    """Where the node starts in the expression (error messages)."""

    level = PRIMARY_LEVEL
    boolean = True
    """Whether the node yields a condition (RocketMQ's BooleanExpression)."""

    def evaluate(self, lookup: Lookup) -> Value:
        raise NotImplementedError

    def render(self) -> str:
        raise NotImplementedError


def _wrap(node: Node, level: int) -> str:
    """``node``'s text, in parentheses when it binds looser than ``level``."""
    text = node.render()
    return f"({text})" if node.level < level else text


@dataclass(frozen=True)
class Constant(Node):
    value: Value

    @property
    def boolean(self) -> bool:  # type: ignore[override]
        return self.value is None or isinstance(self.value, bool)

    def evaluate(self, lookup: Lookup) -> Value:
        return self.value

    def render(self) -> str:
        if self.value is None:
            return "NULL"
        if isinstance(self.value, bool):
            return "TRUE" if self.value else "FALSE"
        if isinstance(self.value, str):
            return "'" + self.value.replace("'", "''") + "'"
        return repr(self.value)


@dataclass(frozen=True)
class Property(Node):
    name: str
    boolean = False

    def evaluate(self, lookup: Lookup) -> Value:
        return lookup(self.name)

    def render(self) -> str:
        return self.name


@dataclass(frozen=True)
class Negate(Node):
    operand: Node
    level = UNARY_LEVEL
    boolean = False

    def evaluate(self, lookup: Lookup) -> Value:
        value = self.operand.evaluate(lookup)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return -value

    def render(self) -> str:
        text = _wrap(self.operand, UNARY_LEVEL)
        return "- " + text if text.startswith("-") else "-" + text  # "--" starts a comment


@dataclass(frozen=True)
class BooleanCast(Node):
    """A property used as a condition: TRUE only for a boolean value, which a property (a
    string) never is."""

    operand: Node

    def evaluate(self, lookup: Lookup) -> Value:
        value = self.operand.evaluate(lookup)
        return None if value is None else value is True

    def render(self) -> str:
        return self.operand.render()


@dataclass(frozen=True)
class Not(Node):
    operand: Node
    level = UNARY_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        value = self.operand.evaluate(lookup)
        return None if value is None else not value

    def render(self) -> str:
        return "NOT " + _wrap(self.operand, UNARY_LEVEL)


@dataclass(frozen=True)
class Logic(Node):
    operator: str
    """``AND`` or ``OR``."""
    left: Node
    right: Node

    @property
    def level(self) -> int:  # type: ignore[override]
        return AND_LEVEL if self.operator == "AND" else OR_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        decisive = self.operator == "OR"  # the value that decides alone
        left = self.left.evaluate(lookup)
        if left is decisive:
            return decisive
        right = self.right.evaluate(lookup)
        if right is decisive:
            return decisive
        if left is None or right is None:
            return None
        return not decisive

    def render(self) -> str:
        return f"{_wrap(self.left, self.level)} {self.operator} {_wrap(self.right, self.level + 1)}"


def compare(left: Value, right: Value) -> int | None:
    """-1, 0 or 1 as RocketMQ's ``__compare`` orders two present values (a string beside a
    number or boolean is read as one first); None when they are of kinds it does not order
    (a boolean and a number), which no comparison accepts. Unmatchable: a string that is
    not a number beside a number."""
    if isinstance(left, str) != isinstance(right, str):
        text, other = (left, right) if isinstance(left, str) else (right, left)
        converted: Value = text.lower() == "true" if isinstance(other, bool) else _number(text)
        left, right = (converted, right) if isinstance(left, str) else (left, converted)
    if isinstance(left, bool) != isinstance(right, bool):
        return None
    assert left is not None and right is not None
    return (left > right) - (left < right)  # type: ignore[operator]


def _number(text: str) -> int | float:
    if not _NUMBER.fullmatch(text):
        raise Unmatchable(f"{text!r} is not a number")
    if not text.lstrip("+-").isdigit():
        return float(text)
    if len(text) > _MAX_INTEGER_DIGITS:  # past any 64-bit constant; int() refuses past 4,300
        return float(text)
    return int(text)


_ORDER = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    "=": lambda c: c == 0,
}


@dataclass(frozen=True)
class Comparison(Node):
    operator: str
    """``=``, ``>``, ``>=``, ``<`` or ``<=`` (``<>`` is ``NOT =``)."""
    left: Node
    right: Node

    @property
    def level(self) -> int:  # type: ignore[override]
        return EQUALITY_LEVEL if self.operator == "=" else COMPARISON_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        left = self.left.evaluate(lookup)
        right = self.right.evaluate(lookup)
        if left is None or right is None:
            return None
        if self.operator != "=" and isinstance(left, str) and isinstance(right, str):
            left, right = _number(left), _number(right)  # strings are ordered as numbers
        order = compare(left, right)
        return order is not None and _ORDER[self.operator](order)

    def render(self) -> str:
        return f"{_wrap(self.left, self.level)} {self.operator} {_wrap(self.right, self.level + 1)}"


@dataclass(frozen=True)
class NotEqual(Node):
    """``a <> b``: NOT ``a = b`` (unknown stays unknown)."""

    equal: Comparison
    level = EQUALITY_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        value = self.equal.evaluate(lookup)
        return None if value is None else not value

    def render(self) -> str:
        e = self.equal
        return f"{_wrap(e.left, self.level)} <> {_wrap(e.right, self.level + 1)}"


@dataclass(frozen=True)
class IsNull(Node):
    operand: Node
    negated: bool
    level = EQUALITY_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        return (self.operand.evaluate(lookup) is None) != self.negated

    def render(self) -> str:
        return f"{_wrap(self.operand, self.level)} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True)
class Between(Node):
    """``v BETWEEN low AND high`` is ``v >= low AND v <= high``; ``NOT BETWEEN`` is
    ``v < low OR v > high``."""

    operand: Node
    low: Node
    high: Node
    negated: bool
    level = COMPARISON_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        if self.negated:
            below = Comparison("<", self.operand, self.low)
            return Logic("OR", below, Comparison(">", self.operand, self.high)).evaluate(lookup)
        above = Comparison(">=", self.operand, self.low)
        return Logic("AND", above, Comparison("<=", self.operand, self.high)).evaluate(lookup)

    def render(self) -> str:
        word = "NOT BETWEEN" if self.negated else "BETWEEN"
        operand, low, high = (_wrap(n, UNARY_LEVEL) for n in (self.operand, self.low, self.high))
        return f"{operand} {word} {low} AND {high}"


@dataclass(frozen=True)
class InList(Node):
    operand: Property
    values: tuple[str, ...]
    negated: bool
    level = COMPARISON_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        value = self.operand.evaluate(lookup)
        if not isinstance(value, str):
            return None
        return (value in self.values) != self.negated

    def render(self) -> str:
        listed = ", ".join(Constant(v).render() for v in self.values)
        return f"{self.operand.render()} {'NOT IN' if self.negated else 'IN'} ({listed})"


_TEXT_TESTS = {
    "CONTAINS": lambda value, text: text in value,
    "STARTSWITH": lambda value, text: value.startswith(text),
    "ENDSWITH": lambda value, text: value.endswith(text),
}


@dataclass(frozen=True)
class TextTest(Node):
    """``v CONTAINS 'x'`` (``STARTSWITH``, ``ENDSWITH``), ``v NOT CONTAINS 'x'``: FALSE
    (never unknown) when ``v`` is missing or not a string, or ``'x'`` is empty."""

    operator: str
    operand: Node
    text: str
    negated: bool
    level = COMPARISON_LEVEL

    def evaluate(self, lookup: Lookup) -> Value:
        value = self.operand.evaluate(lookup)
        if not self.text or not isinstance(value, str):
            return False
        return _TEXT_TESTS[self.operator](value, self.text) != self.negated

    def render(self) -> str:
        word = ("NOT " if self.negated else "") + self.operator
        return f"{_wrap(self.operand, self.level)} {word} {Constant(self.text).render()}"
