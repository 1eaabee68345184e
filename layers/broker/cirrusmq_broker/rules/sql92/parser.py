"""A recursive-descent parser of RocketMQ's SQL92 selector grammar (SelectorParser.jj).

::

    or         := and (OR and)*
    and        := equality (AND equality)*
    equality   := comparison ('=' comparison | '<>' comparison | IS [NOT] NULL)*
    comparison := unary ( ('>' | '>=' | '<' | '<=') unary
                        | [NOT] BETWEEN unary AND unary
                        | [NOT] IN '(' string (',' string)* ')'
                        | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string )*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := literal | property | '(' or ')'

With RocketMQ's checks at parse time: ``> >= < <=`` and ``BETWEEN`` take no string, boolean
or NULL constant and no condition; ``=`` and ``<>`` take no NULL (``IS NULL`` says that);
``IN`` needs a property on its left; constant ``BETWEEN`` bounds are in order; ``AND``,
``OR``, ``NOT`` and the whole expression take conditions (a bare property is one, TRUE only
for a boolean value); integers fit 64 bits. Every error is InvalidFilterExpression with the
position and what was expected.
"""

from __future__ import annotations

import math

from .expression import (
    Between,
    BooleanCast,
    Comparison,
    Constant,
    InList,
    IsNull,
    Logic,
    Negate,
    Node,
    Not,
    NotEqual,
    Property,
    TextTest,
    compare,
)
from .tokens import Token, syntax_error, tokenize

_ORDERING = (">", ">=", "<", "<=")
_TEXT_TESTS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
_LONG_MAX = 2**63 - 1


def parse(expression: str) -> Node:
    """The expression tree of ``expression``; InvalidFilterExpression if malformed."""
    return _Parser(expression).parse()


class _Parser:
    def __init__(self, expression: str) -> None:
        self._expression = expression
        self._tokens = tokenize(expression)
        self._at = 0

    # ---------------------------------------------------------------- token helpers
    def _peek(self, ahead: int = 0) -> Token:
        return self._tokens[min(self._at + ahead, len(self._tokens) - 1)]

    def _is(self, kind: str, *texts: str, ahead: int = 0) -> bool:
        token = self._peek(ahead)
        return token.kind == kind and (not texts or token.text in texts)

    def _take(self) -> Token:
        token = self._peek()
        self._at += 1
        return token

    def _expect(self, kind: str, text: str | None, expected: str) -> Token:
        if not self._is(kind, *([text] if text else [])):
            raise self._error(expected)
        return self._take()

    def _error(self, expected: str, token: Token | None = None) -> Exception:
        token = token or self._peek()
        return syntax_error(self._expression, token.position, expected, token.describe())

    def _refuse(self, node: Node, expected: str) -> Exception:
        found = node.render()
        return syntax_error(self._expression, node.position, expected, found[:100])

    # ---------------------------------------------------------------- grammar
    def parse(self) -> Node:
        if self._is("end"):
            raise self._error("a condition")
        node = self._condition(self._or())
        if not self._is("end"):
            raise self._error("AND, OR, a comparison or the end of the expression")
        return node

    def _or(self) -> Node:
        left = self._and()
        while self._is("keyword", "OR"):
            self._take()
            left = Logic(
                "OR", self._condition(left), self._condition(self._and()), position=left.position
            )
        return left

    def _and(self) -> Node:
        left = self._equality()
        while self._is("keyword", "AND"):
            self._take()
            right = self._condition(self._equality())
            left = Logic("AND", self._condition(left), right, position=left.position)
        return left

    def _equality(self) -> Node:
        left = self._comparison()
        while True:
            if self._is("op", "=", "<>"):
                operator = self._take().text
                right = self._comparison()
                for operand in (left, right):
                    if isinstance(operand, Constant) and operand.value is None:
                        raise self._refuse(operand, "a value to compare (use IS NULL for NULL)")
                if (
                    isinstance(left, Constant)
                    and isinstance(right, Constant)
                    and left.boolean != right.boolean
                    and left.boolean
                ):
                    raise self._refuse(right, "TRUE or FALSE (compared with a boolean)")
                equal = Comparison("=", left, right, position=left.position)
                left = equal if operator == "=" else NotEqual(equal, position=left.position)
            elif self._is("keyword", "IS"):
                self._take()
                negated = self._is("keyword", "NOT")
                if negated:
                    self._take()
                self._expect("keyword", "NULL", "NULL" if negated else "NULL or NOT NULL")
                left = IsNull(left, negated, position=left.position)
            else:
                return left

    def _comparison(self) -> Node:
        left = self._unary()
        while True:
            negated = self._is("keyword", "NOT") and self._is(
                "keyword", "BETWEEN", "IN", *_TEXT_TESTS, ahead=1
            )
            if negated:
                self._take()
            if not negated and self._is("op", *_ORDERING):
                operator = self._take().text
                right = self._unary()
                self._check_ordered(left, right)
                left = Comparison(operator, left, right, position=left.position)
            elif self._is("keyword", "BETWEEN"):
                self._take()
                low = self._unary()
                self._expect("keyword", "AND", "AND (BETWEEN low AND high)")
                high = self._unary()
                self._check_ordered(left, low, high)
                if isinstance(low, Constant) and isinstance(high, Constant):
                    order = compare(high.value, low.value)
                    if order is not None and order < 0:
                        raise self._refuse(
                            high, f"a high bound at least the low bound {low.render()}"
                        )
                left = Between(left, low, high, negated, position=left.position)
            elif self._is("keyword", "IN"):
                in_token = self._take()
                if not isinstance(left, Property):
                    raise self._error("a property on the left of IN", in_token)
                self._expect("op", "(", "'(' opening the IN list")
                values = [self._string("a string in the IN list")]
                while self._is("op", ","):
                    self._take()
                    values.append(self._string("a string in the IN list"))
                self._expect("op", ")", "',' or ')' closing the IN list")
                left = InList(left, tuple(values), negated, position=left.position)
            elif self._is("keyword", *_TEXT_TESTS):
                operator = self._take().text
                text = self._string(f"a string after {operator}")
                left = TextTest(operator, left, text, negated, position=left.position)
            else:
                return left

    def _unary(self) -> Node:
        token = self._peek()
        if self._is("op", "+"):
            self._take()
            return self._unary()
        if self._is("op", "-"):
            self._take()
            return Negate(self._unary(), position=token.position)
        if self._is("keyword", "NOT"):
            self._take()
            return Not(self._condition(self._unary()), position=token.position)
        return self._primary()

    def _primary(self) -> Node:
        token = self._peek()
        if self._is("op", "("):
            self._take()
            node = self._or()
            self._expect("op", ")", "')'")
            return node
        if token.kind == "name":
            self._take()
            return Property(token.text, position=token.position)
        if token.kind == "string":
            self._take()
            return Constant(token.text, position=token.position)
        if token.kind == "integer":
            self._take()
            digits = token.text.rstrip("lL")
            if len(digits) > len(str(_LONG_MAX)) or int(digits) > _LONG_MAX:
                raise self._error("an integer of at most 9223372036854775807", token)
            return Constant(int(digits), position=token.position)
        if token.kind == "float":
            self._take()
            value = float(token.text)
            if math.isinf(value):
                raise self._error("a decimal number within the double range", token)
            return Constant(value, position=token.position)
        if self._is("keyword", "TRUE", "FALSE", "NULL"):
            self._take()
            return Constant(
                {"TRUE": True, "FALSE": False, "NULL": None}[token.text], position=token.position
            )
        raise self._error("a property, a constant, NOT or '('")

    # ---------------------------------------------------------------- checks
    def _string(self, expected: str) -> str:
        return self._expect("string", None, expected).text

    def _condition(self, node: Node) -> Node:
        """``node`` as a condition: a bare property is cast; a number or string is refused."""
        if isinstance(node, Property):
            return BooleanCast(node, position=node.position)
        if not node.boolean:
            raise self._refuse(node, "a condition (a comparison, TRUE, FALSE or a property)")
        return node

    def _check_ordered(self, *operands: Node) -> None:
        """Operands of ``> >= < <=`` and BETWEEN: a number constant, a property or an
        arithmetic negation; never a string, boolean or NULL constant, nor a condition."""
        for operand in operands:
            text = isinstance(operand, Constant) and isinstance(operand.value, str)
            if operand.boolean or text:
                raise self._refuse(operand, "a number or a property (> >= < <= BETWEEN)")
