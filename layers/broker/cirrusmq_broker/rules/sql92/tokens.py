"""The SQL92 filter's tokens, as RocketMQ's selector grammar (SelectorParser.jj) reads them.

Keywords are case-insensitive; property names are case-sensitive ``[A-Za-z_$][A-Za-z0-9_$]*``;
strings are single-quoted with ``''`` for a quote; ``--`` and ``/* */`` comments are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InvalidFilterExpression

KEYWORDS = frozenset(
    [
        "NOT",
        "AND",
        "OR",
        "BETWEEN",
        "IN",
        "TRUE",
        "FALSE",
        "NULL",
        "IS",
        "CONTAINS",
        "STARTSWITH",
        "ENDSWITH",
    ]
)

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n\r]*(?:\r\n|\n|\r|$)|/\*.*?\*/)
    |(?P<float>\d+\.\d*(?:e[+-]?\d+)?|\.\d+(?:e[+-]?\d+)?|\d+e[+-]?\d+)
    |(?P<integer>(?:0|[1-9]\d*)l?)
    |(?P<string>'(?:''|[^'])*')
    |(?P<word>[a-z_$][a-z0-9_$]*)
    |(?P<op><>|>=|<=|[=<>(),+-])
    """,
    re.IGNORECASE | re.VERBOSE | re.DOTALL | re.ASCII,
)


@dataclass(frozen=True)
class Token:
    kind: str
    """``keyword`` (``text`` upper-cased), ``name``, ``integer``, ``float``, ``string`` (``text``
    decoded), ``op`` or ``end``."""
    text: str
    position: int
    """Where the token starts in the expression (0-based characters)."""

    def describe(self) -> str:
        """How an error message names this token."""
        if self.kind == "end":
            return "the end of the expression"
        if self.kind == "string":
            return "'" + self.text.replace("'", "''") + "'"
        return repr(self.text)


def syntax_error(expression: str, position: int, expected: str, found: str) -> Exception:
    """InvalidFilterExpression naming where the expression broke and what was expected."""
    return InvalidFilterExpression(
        f"invalid SQL92 filter at position {position}: expected {expected}, found {found}",
        details={"position": position, "expected": expected, "found": found},
    )


def tokenize(expression: str) -> list[Token]:
    """The tokens of ``expression``, ending with an ``end`` token."""
    tokens: list[Token] = []
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None and expression[position] == "'":
            raise syntax_error(expression, position, "a string closed by '", "no closing quote")
        if match is None:
            raise syntax_error(
                expression, position, "a token", repr(expression[position : position + 10])
            )
        kind, text = match.lastgroup or "", match.group()
        if kind == "word":
            upper = text.upper()
            tokens.append(
                Token("keyword", upper, position)
                if upper in KEYWORDS
                else Token("name", text, position)
            )
        elif kind == "string":
            tokens.append(Token("string", text[1:-1].replace("''", "'"), position))
        elif kind != "space":
            tokens.append(Token(kind, text, position))
        position = match.end()
    tokens.append(Token("end", "", len(expression)))
    return tokens
