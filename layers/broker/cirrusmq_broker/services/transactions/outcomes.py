"""What the transaction steps answer, and the refusals several of them share."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import Conflict, TransactionAlreadyEnded, TransactionNotFound
from ...rules.transaction_state import Resolution, Transaction, TxnState
from ...storage.transactions import TransactionStore


@dataclass(frozen=True)
class HalfReceipt:
    """Where a half message will go once committed (its offset is known only then)."""

    message_id: str
    queue: int


@dataclass(frozen=True)
class HalfSendResult:
    transaction_id: str
    receipts: list[HalfReceipt]
    duplicate: bool
    """This part was stored before (a retried send): nothing was stored now."""


@dataclass(frozen=True)
class EndResult:
    transaction_id: str
    state: TxnState
    changed: bool
    """False when the verdict had been applied before (commit again: a no-op)."""
    reason: str | None = None


def existing(store: TransactionStore, producer_group: str, transaction_id: str) -> Transaction:
    """The stored transaction; TransactionNotFound when there is none."""
    txn = store.get(producer_group, transaction_id)
    if txn is None:
        raise TransactionNotFound(
            f"no transaction {transaction_id!r} in producer group {producer_group!r}"
        )
    return txn


def already_ended(txn: Transaction, wanted: Resolution) -> TransactionAlreadyEnded:
    """The refusal of a verdict on an ended transaction (COMMITTING counts as committed)."""
    state = "COMMITTED" if txn.state is TxnState.COMMITTING else txn.state.value
    reason = f" ({txn.end_reason})" if txn.end_reason else ""
    return TransactionAlreadyEnded(
        f"transaction {txn.transaction_id!r} is {state}{reason}; it cannot be "
        f"{'committed' if wanted is Resolution.COMMIT else 'rolled back'}",
        details={"state": state, "reason": txn.end_reason},
    )


def changed_since(read: Transaction, current: Transaction) -> None:
    """A move conditioned on ``read`` was refused: it is retried on ``current`` only if
    that differs (another state or more parts), else Conflict (never a loop)."""
    if current.state is read.state and current.message_count == read.message_count:
        raise Conflict(f"transaction {read.transaction_id!r} changed meanwhile; retry")
