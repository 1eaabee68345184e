"""Transactional messages: :class:`TransactionProducer` (half messages, commit or rollback, the
checker answering the service's checks), :class:`ExactlyOnceProducer` (consume -> produce
steps: acks and sends committed as one) and :class:`TransactionAdmin` (operators' tools)."""

from __future__ import annotations

from .admin import TransactionAdmin
from .exactly_once import (
    AsyncExactlyOnceProducer,
    AsyncExactlyOnceStep,
    ExactlyOnceProducer,
    ExactlyOnceStep,
    StepResult,
)
from .models import (
    OpenTransaction,
    TransactionChecker,
    TransactionMessageView,
    TransactionReceipt,
    TransactionResolution,
)
from .producer import Transaction, TransactionProducer

__all__ = [
    "AsyncExactlyOnceProducer",
    "AsyncExactlyOnceStep",
    "ExactlyOnceProducer",
    "ExactlyOnceStep",
    "StepResult",
    "OpenTransaction",
    "Transaction",
    "TransactionAdmin",
    "TransactionChecker",
    "TransactionMessageView",
    "TransactionProducer",
    "TransactionReceipt",
    "TransactionResolution",
]
