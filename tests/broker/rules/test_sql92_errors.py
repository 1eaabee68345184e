"""Malformed SQL92 filters: InvalidFilterExpression with the position and what was expected."""

import pytest
from cirrusmq_broker.errors import InvalidFilterExpression
from cirrusmq_broker.rules.filters import MAX_SQL_DEPTH, SqlFilter, parse_filter


@pytest.mark.parametrize(
    ("expression", "position", "expected"),
    [
        # ParserTest.testParse_invalid
        ("a and between 2 and 10", 6, "a property, a constant, NOT or '('"),
        # ParserTest.testParse_illegalBetween
        (" a between 10 and 0", 18, "a high bound at least the low bound 10"),
        # ParserTest.testParse_decimalOverFlow
        ("a > 100000000000000000000000", 4, "an integer of at most 9223372036854775807"),
        # ExpressionTest.testContains_has_not_string_1 / _2, testContains_string_has_nothing
        ("value contains x", 15, "a string after CONTAINS"),
        ("value not contains 123", 19, "a string after CONTAINS"),
        ("'axb' contains ", 15, "a string after CONTAINS"),
        # ComparisonExpression.checkLessThanOperand: no strings, booleans or conditions
        ("a > 'x'", 4, "a number or a property (> >= < <= BETWEEN)"),
        ("a >= TRUE", 5, "a number or a property (> >= < <= BETWEEN)"),
        ("NOT a > 5", 0, "a number or a property (> >= < <= BETWEEN)"),
        ("a BETWEEN 'x' AND 'y'", 10, "a number or a property (> >= < <= BETWEEN)"),
        # ComparisonExpression.checkEqualOperand / checkEqualOperandCompatability
        ("a = NULL", 4, "a value to compare (use IS NULL for NULL)"),
        ("TRUE = 5", 7, "TRUE or FALSE (compared with a boolean)"),
        # ComparisonExpression.createInFilter: a property on the left of IN
        ("'a' IN ('a')", 4, "a property on the left of IN"),
        ("a IN (1, 2)", 6, "a string in the IN list"),
        ("a IN ()", 6, "a string in the IN list"),
        ("a IN ('x'", 9, "',' or ')' closing the IN list"),
        # SelectorParser.asBooleanExpression: conditions only
        ("5", 0, "a condition (a comparison, TRUE, FALSE or a property)"),
        ("'x' AND a = 1", 0, "a condition (a comparison, TRUE, FALSE or a property)"),
        # the grammar's tokens and structure
        ("a >", 3, "a property, a constant, NOT or '('"),
        ("(a > 5", 6, "')'"),
        ("a > 5)", 5, "AND, OR, a comparison or the end of the expression"),
        ("a == 5", 3, "a property, a constant, NOT or '('"),
        ("a != 5", 2, "a token"),
        ("a = 'open", 4, "a string closed by '"),
        ("a IS 5", 5, "NULL or NOT NULL"),
        ("a BETWEEN 1 OR 2", 12, "AND (BETWEEN low AND high)"),
        ("a > 5 b < 3", 6, "AND, OR, a comparison or the end of the expression"),
        ("a > 007", 5, "AND, OR, a comparison or the end of the expression"),
    ],
)
def test_malformed_expression_names_position_and_expectation(expression, position, expected):
    with pytest.raises(InvalidFilterExpression) as caught:
        SqlFilter.parse(expression)
    assert caught.value.code == "InvalidFilterExpression"
    assert caught.value.details["position"] == position
    assert caught.value.details["expected"] == expected
    assert f"at position {position}" in caught.value.message


@pytest.mark.parametrize("expression", ["", "   ", None, "\n"])
def test_empty_expression_is_refused(expression):
    with pytest.raises(InvalidFilterExpression) as caught:
        SqlFilter.parse(expression)
    assert caught.value.details == {"position": 0, "expected": "a condition"}


def test_unstorable_and_oversized_expressions_are_refused():
    for expression in ["a = '\ud800'", "a = '" + "x" * 20_000 + "'"]:
        with pytest.raises(InvalidFilterExpression):
            SqlFilter.parse(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 500 + "a > 1" + ")" * 500,
        "NOT " * 300 + "a",
        " AND ".join(["a = 1"] * (MAX_SQL_DEPTH + 1)),
    ],
)
def test_deeply_nested_expressions_are_refused(expression):
    """Evaluation recurses through the tree: its depth is bounded when it is parsed."""
    with pytest.raises(InvalidFilterExpression):
        SqlFilter.parse(expression)


def test_unknown_filter_type_is_refused():
    with pytest.raises(InvalidFilterExpression) as caught:
        parse_filter("a > 1", "SQL")
    assert caught.value.details == {"filter_type": "SQL"}


def test_filter_type_selects_the_parser():
    assert parse_filter("TagA || TagB", None).subscription.filter_type == "TAG"
    assert parse_filter("a > 1", "SQL92").subscription.describe() == "SQL92 a > 1"


def test_an_integer_of_thousands_of_digits_is_refused_not_failed():
    """Python's int() refuses over 4,300 digits: the parser refuses first, with a position."""
    with pytest.raises(InvalidFilterExpression) as caught:
        SqlFilter.parse("a > " + "1" * 5000)
    assert caught.value.details["position"] == 4


def test_digits_and_blanks_are_ascii_only():
    """RocketMQ's grammar reads ASCII digits ["0"-"9"] and blanks only."""
    with pytest.raises(InvalidFilterExpression):
        SqlFilter.parse("a > \u0665")  # ARABIC-INDIC DIGIT FIVE
    with pytest.raises(InvalidFilterExpression):
        SqlFilter.parse("a\u00a0> 5")  # NO-BREAK SPACE


def test_canonical_text_of_a_double_negation_parses_back():
    """``--`` starts a comment: the canonical text keeps the two minus signs apart."""
    sql = SqlFilter.parse("a > - -5")
    assert SqlFilter.parse(sql.expression).condition == sql.condition


def test_a_filter_whose_canonical_text_is_too_long_is_refused():
    """What the service stores and shows must be accepted when sent back."""
    dense = "a IN (" + ",".join(["'x'"] * 2000) + ")"  # 8,006 characters, 10,005 canonical
    with pytest.raises(InvalidFilterExpression):
        SqlFilter.parse(dense)
