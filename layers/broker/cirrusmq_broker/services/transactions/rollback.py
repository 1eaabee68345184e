"""Rolling a transaction back: the producer's or a check's verdict, or the checker's
(out of checks, past retention, topic deleted). Its half messages are deleted after."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ...errors import Conflict
from ...rules.transaction_state import ENDED_KEEP_SECONDS, Resolution, Transaction, TxnState
from ...storage.half_objects import HalfObjectStore
from ...storage.transactions import FenceFailed, StateChanged, TransactionStore
from ..topic_catalog import TopicCatalog
from ..trace import record_transaction
from .outcomes import EndResult, already_ended, changed_since, existing
from .registration import Registrations

log = logging.getLogger("cirrusmq.transactions")

REASONS = {
    "producer": "rolled back by the producer",
    "check": "rolled back by a check's answer",
    "operator": "rolled back by an operator",
}
"""The recorded reason of a rollback verdict, by who gave it."""


class Rollbacks:
    def __init__(
        self,
        *,
        store: TransactionStore,
        halves: HalfObjectStore,
        registrations: Registrations,
        clock: Callable[[], int],
        topics: TopicCatalog | None = None,
    ) -> None:
        self._topics = topics
        """Asked whether the transaction's topic is traced (message trace)."""
        self._store = store
        self._halves = halves
        self._registrations = registrations
        self._clock = clock

    def verdict(
        self,
        txn: Transaction,
        producer: tuple[str, int] | None,
        by: str,
        access_key: str | None = None,
    ) -> EndResult:
        """Apply a rollback verdict: a no-op on a rolled back transaction (its halves are
        deleted again), TransactionAlreadyEnded on a committed one."""
        if txn.state is TxnState.ROLLED_BACK:
            self._halves.delete([o.key for o in txn.objects])
            return EndResult(txn.transaction_id, txn.state, changed=False, reason=txn.end_reason)
        if txn.state is not TxnState.OPEN:
            raise already_ended(txn, Resolution.ROLLBACK)
        reason = REASONS.get(by, f"rolled back by {by}")
        return self.rolled_back(txn, reason, by, producer=producer, access_key=access_key)

    def rolled_back(
        self,
        txn: Transaction,
        reason: str,
        by: str,
        *,
        producer: tuple[str, int] | None = None,
        expect: tuple[TxnState, ...] = (TxnState.OPEN,),
        access_key: str | None = None,
    ) -> EndResult:
        """Mark ``txn`` ROLLED_BACK (from a state in ``expect``) with ``reason``; a part
        that landed since the read is discarded too."""
        now = self._clock()
        try:
            self._store.transition(
                txn.producer_group,
                txn.transaction_id,
                expect=expect,
                to=TxnState.ROLLED_BACK,
                now=now,
                values={"end_reason": reason, "ended_by": by},
                fence=producer,
                expires_at=now // 1000 + ENDED_KEEP_SECONDS,
                access_key=access_key,
                message_count=txn.message_count,
            )
        except FenceFailed:
            assert producer is not None
            self._registrations.fence(txn.producer_group, *producer, access_key)
            raise Conflict("the producer registration changed; retry") from None
        except StateChanged:
            current = existing(self._store, txn.producer_group, txn.transaction_id)
            if current.state is TxnState.ROLLED_BACK:
                self.cleanup(current)
                return EndResult(txn.transaction_id, current.state, False, current.end_reason)
            if current.state in expect:  # a part landed since the read: discard it too
                changed_since(txn, current)
                return self.rolled_back(
                    current, reason, by, producer=producer, expect=expect, access_key=access_key
                )
            raise already_ended(current, Resolution.ROLLBACK) from None
        self.cleanup(txn)
        if self._topics is not None:
            record_transaction(self._topics, txn.topic, "rolled_back", txn.transaction_id, reason)
        log.info(
            "transaction %s/%s rolled back: %s", txn.producer_group, txn.transaction_id, reason
        )
        return EndResult(txn.transaction_id, TxnState.ROLLED_BACK, changed=True, reason=reason)

    def cleanup(self, txn: Transaction) -> None:
        """Delete an ended transaction's half objects and its pending check."""
        self._halves.delete([o.key for o in txn.objects])
        if txn.checks:
            self._store.remove_pending(txn.producer_group, [txn.transaction_id])
