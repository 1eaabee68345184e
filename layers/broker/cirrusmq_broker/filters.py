"""Tag filter expressions: ``*`` (everything) or ``TagA || TagB``."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import InvalidFilterExpression
from .limits import MAX_TAG_CHARS
from .validation import TAG_FORBIDDEN

MAX_FILTER_TAGS = 64
MAX_FILTER_CHARS = MAX_FILTER_TAGS * (MAX_TAG_CHARS + 4)


@dataclass(frozen=True)
class TagFilter:
    """A parsed filter: ``tags`` is None for ``*``."""

    tags: frozenset[str] | None

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        """Parse ``*``, an empty expression (same as ``*``) or ``A || B || C``."""
        text = (expression or "*").strip()
        if len(text) > MAX_FILTER_CHARS or text.count("||") >= MAX_FILTER_TAGS:
            raise InvalidFilterExpression(
                f"a filter has at most {MAX_FILTER_TAGS} tags and {MAX_FILTER_CHARS} characters"
            )
        if text in ("", "*"):
            return cls(None)
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
