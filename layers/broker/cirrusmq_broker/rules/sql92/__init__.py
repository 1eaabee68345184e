"""SQL92 property filters with RocketMQ's semantics: parse once, match each message."""

from __future__ import annotations

from .expression import Node, Unmatchable
from .parser import parse

__all__ = ["Node", "depth", "evaluate", "parse"]


def depth(node: Node) -> int:
    """How deeply ``node`` nests (a property or constant: 1)."""
    children = [v for v in vars(node).values() if isinstance(v, Node)]
    return 1 + max((depth(child) for child in children), default=0)


def evaluate(node: Node, properties: dict[str, str], tag: str | None) -> bool:
    """Whether a message with ``properties`` and ``tag`` (the ``TAGS`` property) matches:
    only a TRUE result does; unknown, FALSE and a value that could not be read do not."""

    def lookup(name: str) -> str | None:
        return tag if name == "TAGS" else properties.get(name)

    try:
        return node.evaluate(lookup) is True
    except Unmatchable:
        return False
