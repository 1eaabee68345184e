"""Transactional messages: registration, half sends, commit, rollback, back-checks.

:class:`TransactionService` is the entry point; each step is a module of its own (see
:mod:`.service`). A commit is :mod:`.commit`.
"""

from __future__ import annotations

from .checks import CheckReport, CheckRequest
from .outcomes import EndResult, HalfReceipt, HalfSendResult
from .service import TransactionService

__all__ = [
    "CheckReport",
    "CheckRequest",
    "EndResult",
    "HalfReceipt",
    "HalfSendResult",
    "TransactionService",
]
