"""A group's filter on a topic: tags (``*`` or ``TagA || TagB``) or an SQL92 condition on
the message's properties (rules/sql92). Both are applied to what a receive reads anyway."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidFilterExpression
from ..limits import MAX_TAG_CHARS
from ..validation import TAG_FORBIDDEN
from . import sql92

if TYPE_CHECKING:
    from ..model import StoredMessage

MAX_FILTER_TAGS = 64
MAX_FILTER_CHARS = MAX_FILTER_TAGS * (MAX_TAG_CHARS + 4)
MAX_SQL_DEPTH = 64
"""How deeply an SQL92 condition may nest (operators inside operators): evaluation recurses."""
TAG, SQL92 = "TAG", "SQL92"


@dataclass(frozen=True)
class Subscription:
    """What a group records per topic: the filter's type and canonical expression."""

    expression: str
    filter_type: str = TAG

    def describe(self) -> str:
        """How error messages name it: the tag expression, or ``SQL92 <condition>``."""
        return self.expression if self.filter_type == TAG else f"SQL92 {self.expression}"


def parse_filter(expression: str | None, filter_type: str | None = TAG) -> Filter:
    """The filter of ``filter_type`` (TAG when None) written ``expression``."""
    if filter_type in (None, TAG):
        return TagFilter.parse(expression)
    if filter_type == SQL92:
        return SqlFilter.parse(expression)
    raise InvalidFilterExpression(
        f"unknown filter type {str(filter_type)[:50]!r}: use TAG or SQL92",
        details={"filter_type": str(filter_type)[:50]},
    )


@dataclass(frozen=True)
class TagFilter:
    """A parsed filter: ``tags`` is None for ``*``."""

    tags: frozenset[str] | None

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        """Parse ``*`` (also what ``None``, no filter given, means) or ``A || B || C``.

        An empty or blank expression is refused rather than read as ``*``: a filter that
        lost its tags must not subscribe to everything. So is text that is not valid
        Unicode (a lone surrogate cannot be stored as UTF-8)."""
        if expression is None:
            return cls(None)
        try:
            expression.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidFilterExpression("the filter expression is not valid Unicode") from None
        text = expression.strip()
        if len(text) > MAX_FILTER_CHARS or text.count("||") >= MAX_FILTER_TAGS:
            raise InvalidFilterExpression(
                f"a filter has at most {MAX_FILTER_TAGS} tags and {MAX_FILTER_CHARS} characters"
            )
        if text == "*":
            return cls(None)
        if not text:
            raise InvalidFilterExpression("the filter expression is empty: use '*' or 'TagA'")
        tags = [part.strip() for part in text.split("||")]
        if any(
            not tag or tag == "*" or len(tag) > MAX_TAG_CHARS or TAG_FORBIDDEN.search(tag)
            for tag in tags
        ):
            raise InvalidFilterExpression(
                f"invalid filter expression {expression[:200]!r}: use '*' or 'TagA || TagB'"
            )
        return cls(frozenset(tags))

    @property
    def expression(self) -> str:
        """The canonical text: ``*`` or the tags sorted, joined by `` || ``."""
        return "*" if self.tags is None else " || ".join(sorted(self.tags))

    @property
    def subscription(self) -> Subscription:
        return Subscription(self.expression, TAG)

    def matches(self, tag: str | None) -> bool:
        """Whether a message with ``tag`` passes (untagged messages pass only ``*``)."""
        return self.tags is None or (tag is not None and tag in self.tags)

    def accepts(self, message: StoredMessage) -> bool:
        """Whether ``message`` passes."""
        return self.matches(message.tag)


@dataclass(frozen=True)
class SqlFilter:
    """A parsed SQL92 condition on a message's properties (``TAGS``: its tag)."""

    condition: sql92.Node

    @classmethod
    def parse(cls, expression: str | None) -> SqlFilter:
        """Parse ``expression``; InvalidFilterExpression (with the position and what was
        expected) if it is empty, too long, too deeply nested or malformed."""
        if expression is None or not expression.strip():
            raise InvalidFilterExpression(
                "an SQL92 filter needs a condition, e.g. \"a > 5 AND region IN ('eu')\"",
                details={"position": 0, "expected": "a condition"},
            )
        try:
            expression.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidFilterExpression("the filter expression is not valid Unicode") from None
        if len(expression) > MAX_FILTER_CHARS:
            raise InvalidFilterExpression(
                f"an SQL92 filter has at most {MAX_FILTER_CHARS} characters"
            )
        try:
            condition = sql92.parse(expression)
            deep = sql92.depth(condition) > MAX_SQL_DEPTH
        except RecursionError:
            deep = True
        if deep:
            raise InvalidFilterExpression(
                f"an SQL92 filter nests at most {MAX_SQL_DEPTH} operators deep"
            )
        parsed = cls(condition)
        if len(parsed.expression) > MAX_FILTER_CHARS:  # what is stored must parse again
            raise InvalidFilterExpression(
                f"an SQL92 filter has at most {MAX_FILTER_CHARS} characters in canonical form "
                "(keywords upper-case, single spaces)"
            )
        return parsed

    @property
    def expression(self) -> str:
        """The canonical text: keywords upper-case, single spaces, needed parentheses."""
        return self.condition.render()

    @property
    def subscription(self) -> Subscription:
        return Subscription(self.expression, SQL92)

    def accepts(self, message: StoredMessage) -> bool:
        """Whether ``message`` passes: the condition is TRUE on its properties."""
        return sql92.evaluate(self.condition, message.properties, message.tag)


Filter = TagFilter | SqlFilter
