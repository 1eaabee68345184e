"""The types of transactional messaging: resolutions, checks, receipts, open transactions,
and the paths of the transaction API."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

from ..message import MessageView
from ..wire import read_int, read_mapping, read_optional_str, read_str

__all__ = [
    "OpenTransaction",
    "TransactionChecker",
    "TransactionMessageView",
    "TransactionReceipt",
    "TransactionResolution",
]


class TransactionResolution(enum.Enum):
    """A verdict: COMMIT, ROLLBACK, or (from a checker) UNKNOWN: ask again later."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True)
class TransactionMessageView(MessageView):
    """The first half message of a transaction being checked (``offset`` is -1: it is not
    in the topic yet)."""

    transaction_id: str = ""
    check_number: int = 0
    """1 for the first check, then 2, 3, ..."""
    message_count: int = 1
    """Messages in the transaction."""


@runtime_checkable
class TransactionChecker(Protocol):
    """Answers the service's question: did the local transaction of this message commit?"""

    def check(self, message: TransactionMessageView) -> TransactionResolution: ...


Checker = TransactionChecker | Callable[[TransactionMessageView], TransactionResolution]


@dataclass(frozen=True)
class TransactionReceipt:
    """A half message: where it will go once committed (its offset is known only then)."""

    message_id: str
    queue: int
    transaction_id: str


def group_path(producer_group: str) -> str:
    return f"/v1/producer-groups/{quote(producer_group, safe='')}"


def transaction_path(producer_group: str, transaction_id: str) -> str:
    return f"{group_path(producer_group)}/transactions/{quote(transaction_id, safe='')}"


def now_ms() -> int:
    import time

    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------- operators
@dataclass(frozen=True)
class OpenTransaction:
    """An undecided (or ended, when described) transaction, as operators see it."""

    producer_group: str
    transaction_id: str
    transactional_id: str
    topic: str
    state: str
    created_timestamp: int
    age_seconds: float
    message_count: int
    checks: int
    max_checks: int
    next_check_timestamp: int | None
    end_reason: str | None = None

    @classmethod
    def from_wire(cls, data: Any) -> OpenTransaction:
        data = read_mapping(data, "transaction")
        next_check = data.get("next_check_timestamp")
        return cls(
            read_str(data, "producer_group"),
            read_str(data, "transaction_id"),
            read_str(data, "transactional_id"),
            read_str(data, "topic"),
            read_str(data, "state"),
            read_int(data, "created_timestamp"),
            float(data.get("age_seconds") or 0),
            read_int(data, "message_count"),
            read_int(data, "checks"),
            read_int(data, "max_checks"),
            int(next_check) if isinstance(next_check, int) else None,
            read_optional_str(data, "end_reason"),
        )
