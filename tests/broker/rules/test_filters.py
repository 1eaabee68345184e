import pytest
from cirrusmq_broker.errors import InvalidFilterExpression
from cirrusmq_broker.rules.filters import TagFilter


@pytest.mark.parametrize("expression", ["*", "  *  ", None])
def test_star_matches_everything(expression):
    f = TagFilter.parse(expression)
    assert f.matches("A") and f.matches(None)


def test_or_expression_matches_listed_tags_only():
    f = TagFilter.parse("TagA || TagB")
    assert f.matches("TagA") and f.matches("TagB")
    assert not f.matches("TagC") and not f.matches(None)


def test_single_tag():
    assert TagFilter.parse("TagA").tags == frozenset({"TagA"})


@pytest.mark.parametrize("expression", ["A ||", "|| A", "A || || B", "A B", "A || *", "A | B"])
def test_malformed_expressions_are_refused(expression):
    with pytest.raises(InvalidFilterExpression):
        TagFilter.parse(expression)


@pytest.mark.parametrize("expression", ["", " ", "\n", "\ud800", "A || \udfff"])
def test_empty_blank_and_unstorable_expressions_are_refused(expression):
    """An empty filter is not ``*`` (a filter that lost its tags must not subscribe to
    everything); text with a lone surrogate cannot be stored as UTF-8."""
    with pytest.raises(InvalidFilterExpression):
        TagFilter.parse(expression)
