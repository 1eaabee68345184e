"""Test helpers: ``from cirrusmq.testing import LocalStack`` (needs ``cirrusmq[local]``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cirrusmq_local.stack import LocalStack

__all__ = ["LocalStack"]


def __getattr__(name: str) -> Any:
    if name == "LocalStack":
        try:
            from cirrusmq_local.stack import LocalStack
        except ImportError as exc:
            raise ImportError(
                "cirrusmq.testing.LocalStack needs the local stack: pip install 'cirrusmq[local]'"
                f" ({exc})"
            ) from exc
        return LocalStack
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
