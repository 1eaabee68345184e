"""Transactional messages: :class:`TransactionProducer` (half messages, commit or rollback, the
checker answering the service's checks) and :class:`TransactionAdmin` (operators' tools)."""

from __future__ import annotations

from .admin import TransactionAdmin
from .models import (
    OpenTransaction,
    TransactionChecker,
    TransactionMessageView,
    TransactionReceipt,
    TransactionResolution,
)
from .producer import Transaction, TransactionProducer

__all__ = [
    "OpenTransaction",
    "Transaction",
    "TransactionAdmin",
    "TransactionChecker",
    "TransactionMessageView",
    "TransactionProducer",
    "TransactionReceipt",
    "TransactionResolution",
]
