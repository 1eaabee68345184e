"""Tag filter expressions: ``*`` (everything) or ``TagA || TagB``."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidFilterExpression
from ..limits import MAX_TAG_CHARS
from ..validation import TAG_FORBIDDEN

MAX_FILTER_TAGS = 64
MAX_FILTER_CHARS = MAX_FILTER_TAGS * (MAX_TAG_CHARS + 4)


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

    def matches(self, tag: str | None) -> bool:
        """Whether a message with ``tag`` passes (untagged messages pass only ``*``)."""
        return self.tags is None or (tag is not None and tag in self.tags)
