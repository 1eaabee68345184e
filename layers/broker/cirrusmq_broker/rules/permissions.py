"""Access-key permissions: pure rules, no I/O (deny by default).

A permission set is stored with its key as JSON::

    {"admin": false,
     "publish": ["orders", "audit-*"],
     "subscribe": [{"groups": ["billing"], "topics": ["orders", "pay-*"]}]}

A pattern is an exact name or a prefix ending in ``*``; ``admin`` allows everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest

PATTERN = re.compile(r"^(?:[A-Za-z0-9_-]{1,127}|[A-Za-z0-9_-]{0,126}\*)$")
"""A name, or a prefix of up to 126 name characters followed by ``*``."""
MAX_PATTERNS = 100
"""Patterns per list (publish, a grant's groups, a grant's topics) and grants per key."""


def matches(pattern: str, name: str) -> bool:
    """Whether ``name`` is ``pattern`` or starts with its prefix (``pattern`` ends in ``*``)."""
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def _any(patterns: tuple[str, ...], name: str) -> bool:
    return any(matches(p, name) for p in patterns)


@dataclass(frozen=True)
class SubscribeGrant:
    """Consume as any of ``groups`` from any of ``topics``."""

    groups: tuple[str, ...]
    topics: tuple[str, ...]


@dataclass(frozen=True)
class Permissions:
    """What an access key may do; the default allows nothing."""

    admin: bool = False
    publish: tuple[str, ...] = ()
    subscribe: tuple[SubscribeGrant, ...] = ()

    # ------------------------------------------------------------------ rules
    def may_publish(self, topic: str) -> bool:
        return self.admin or _any(self.publish, topic)

    def may_subscribe(self, group: str, topic: str) -> bool:
        """Consume ``topic`` as ``group``: one grant must match both."""
        return self.admin or any(
            _any(g.groups, group) and _any(g.topics, topic) for g in self.subscribe
        )

    def may_subscribe_group(self, group: str) -> bool:
        """Some grant names ``group`` (whatever the topic)."""
        return self.admin or any(_any(g.groups, group) for g in self.subscribe)

    def may_subscribe_topic(self, topic: str) -> bool:
        """Some grant names ``topic`` (whatever the group)."""
        return self.admin or any(_any(g.topics, topic) for g in self.subscribe)

    def may_see_topic(self, topic: str) -> bool:
        """Describe or list ``topic``: admin, or any publish / subscribe pattern matches it."""
        return self.may_publish(topic) or self.may_subscribe_topic(topic)

    # ---------------------------------------------------------------- (de)serialise
    def to_json(self) -> dict[str, Any]:
        return {
            "admin": self.admin,
            "publish": list(self.publish),
            "subscribe": [
                {"groups": list(g.groups), "topics": list(g.topics)} for g in self.subscribe
            ],
        }

    @classmethod
    def from_json(cls, value: Any) -> Permissions:
        """Parse and check a permission document; InvalidRequest when malformed."""
        if not isinstance(value, dict):
            raise InvalidRequest("permissions must be an object")
        unknown = sorted(set(value) - {"admin", "publish", "subscribe"})
        if unknown:
            raise InvalidRequest(f"unknown permission field(s): {', '.join(unknown)}")
        admin = value.get("admin", False)
        if not isinstance(admin, bool):
            raise InvalidRequest("permissions.admin must be true or false")
        grants = value.get("subscribe", [])
        if not isinstance(grants, list) or len(grants) > MAX_PATTERNS:
            raise InvalidRequest(f"permissions.subscribe must be a list of <= {MAX_PATTERNS}")
        parsed = []
        for position, grant in enumerate(grants):
            where = f"permissions.subscribe[{position}]"
            if not isinstance(grant, dict) or set(grant) != {"groups", "topics"}:
                raise InvalidRequest(f"{where} must be {{'groups': [...], 'topics': [...]}}")
            parsed.append(
                SubscribeGrant(
                    _patterns(grant["groups"], f"{where}.groups", non_empty=True),
                    _patterns(grant["topics"], f"{where}.topics", non_empty=True),
                )
            )
        publish = _patterns(value.get("publish", []), "permissions.publish")
        return cls(admin=admin, publish=publish, subscribe=tuple(parsed))


def _patterns(value: Any, where: str, *, non_empty: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_PATTERNS:
        raise InvalidRequest(f"{where} must be a list of at most {MAX_PATTERNS} patterns")
    if non_empty and not value:
        raise InvalidRequest(f"{where} must name at least one pattern")
    for pattern in value:
        if not isinstance(pattern, str) or not PATTERN.fullmatch(pattern):
            shown = repr(pattern)[:140]
            raise InvalidRequest(
                f"{where}: {shown} is not a name or a prefix ending in '*' (A-Z a-z 0-9 _ -)"
            )
    return tuple(value)


ADMIN = Permissions(admin=True)
"""Everything (the local stack's bootstrap key)."""
