"""The transaction service: one entry point composed of the steps of a transaction.

- :mod:`.registration`: registering a transactional producer (epochs, fencing);
- :mod:`.half_send`: half sends (the messages held back until the verdict);
- :mod:`.commit`: a commit (the half messages appended to the topic);
- :mod:`.rollback`: a rollback (the half messages dropped);
- :mod:`.checks`: the back-checker's passes and the producers' polls for checks.

The rules (states, check steps, routing, keys) are in
:mod:`cirrusmq_broker.rules.transaction_state`; the transaction item and its codec in
:mod:`cirrusmq_broker.storage.transactions`. This module decides who may end a
transaction and dispatches a verdict to its step.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...errors import AccessDenied
from ...rules.transaction_state import (
    Resolution,
    Transaction,
    TxnState,
    check_id,
)
from ...storage.half_objects import HalfObjectStore
from ...storage.producers import ProducerRecords
from ...storage.transactions import TransactionStore
from ...validation import check_group_name
from ..batch_writer import BatchWriter
from ..topic_catalog import TopicCatalog
from ..trace import TraceRecorder
from .checks import Checks
from .commit import Commits
from .half_send import HalfSends
from .outcomes import EndResult, existing
from .registration import Registrations
from .rollback import Rollbacks


class TransactionService:
    """Transactions of every producer group: :meth:`register`, :meth:`send` (half
    messages), :meth:`end` (commit, rollback or a check's UNKNOWN), :meth:`run_checks` and
    :meth:`poll_checks` (back-checks), :meth:`list_open` and :meth:`describe`."""

    def __init__(
        self,
        *,
        store: TransactionStore,
        halves: HalfObjectStore,
        topics: TopicCatalog,
        writer: BatchWriter,
        records: ProducerRecords,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
        wake: Callable[[list[int]], None] | None = None,
        trace: Callable[[], TraceRecorder] | None = None,
    ) -> None:
        """``wake``: told the due times of checks a half send opened (starts a checker run
        unless one covers them); ``trace``: each checker pass is one request of trace."""
        self._store = store
        self._halves = halves
        self._writer = writer
        self._registrations = Registrations(store=store, clock=clock)
        self._rollbacks = Rollbacks(
            store=store,
            halves=halves,
            registrations=self._registrations,
            clock=clock,
            topics=topics,
        )
        self._commits = Commits(
            store=store,
            halves=halves,
            topics=topics,
            writer=writer,
            records=records,
            registrations=self._registrations,
            rollbacks=self._rollbacks,
            clock=clock,
        )
        self._half_sends = HalfSends(
            store=store,
            halves=halves,
            topics=topics,
            registrations=self._registrations,
            clock=clock,
            wake=wake,
        )
        self._checks = Checks(
            store=store,
            halves=halves,
            topics=topics,
            registrations=self._registrations,
            commits=self._commits,
            rollbacks=self._rollbacks,
            clock=clock,
            sleep=sleep,
            runs=store.runs,
            trace=trace,
        )
        # The steps' own methods are the service's: one signature and docstring each.
        self.register = self._registrations.register
        self.register_once = self._registrations.register_once
        self.send = self._half_sends.send
        self.check_send = self._half_sends.check
        self.transactional_topic = self._half_sends.transactional_topic
        self.run = self._checks.run
        self.run_checks = self._checks.run_checks
        self.any_undecided = self._checks.any_undecided
        self.next_due_in = self._checks.next_due_in
        self.poll_checks = self._checks.poll_checks
        self.may_answer = self._checks.may_answer
        self.check_outstanding = self._checks.check_outstanding

    # ------------------------------------------------------------ verdicts
    def end(
        self,
        producer_group: str,
        transaction_id: str,
        resolution: Resolution,
        *,
        producer: tuple[str, int] | None = None,
        by: str = "producer",
        allowed: Callable[[str], bool] | None = None,
        access_key: str | None = None,
        readable: Callable[[str], bool] | None = None,
    ) -> EndResult:
        """Apply a verdict. ``producer`` = (transactional id, epoch) is fenced: a newer
        registration of that id makes it fail with ProducerFenced. Committing a committed
        transaction is a no-op; any other verdict on an ended one is TransactionAlreadyEnded.
        UNKNOWN (an answer to a check) leaves it open for the next check.

        With ``access_key`` (not an admin) only the transaction's own producer ends it; a
        check's answer (``by="check"``) comes from a producer that may be handed the check
        (:meth:`may_answer`); AccessDenied otherwise."""
        check_group_name(producer_group)
        check_id(transaction_id, "transaction id")
        txn = existing(self._store, producer_group, transaction_id)
        if allowed is not None and not allowed(txn.topic):
            raise AccessDenied(f"access denied: publish to topic {txn.topic}")
        if access_key is not None and producer is not None:
            self._check_may_end(txn, producer, by, access_key, readable)
        if resolution is Resolution.UNKNOWN:
            if producer is not None:
                self._registrations.fence(producer_group, *producer, access_key)
            if txn.state is TxnState.OPEN:
                self._store.release_claim(producer_group, transaction_id)
                self._store.remove_pending(producer_group, [transaction_id])
            return EndResult(transaction_id, txn.state, changed=False)
        if resolution is Resolution.COMMIT:
            return self._commits.commit(txn, producer, by, access_key)
        return self._rollbacks.verdict(txn, producer, by, access_key)

    def _check_may_end(
        self,
        txn: Transaction,
        producer: tuple[str, int],
        by: str,
        access_key: str,
        readable: Callable[[str], bool] | None,
    ) -> None:
        """AccessDenied unless ``producer`` (transactional id, epoch) may end ``txn`` (see end):
        another producer's answer is accepted only while a check is outstanding, handed to it
        (a fenced one is ProducerFenced first, as for any of its calls)."""
        transactional_id = producer[0]
        if (
            by == "check"
            and transactional_id != txn.transactional_id
            and self.may_answer(txn, transactional_id, access_key, readable)
        ):
            if self.check_outstanding(txn, transactional_id):
                return
            self._registrations.fence(txn.producer_group, *producer, access_key)
            raise AccessDenied(
                f"access denied: transaction {txn.transaction_id!r} belongs to producer "
                f"{txn.transactional_id!r}, and no check of it is handed to producer "
                f"{transactional_id!r} now: another producer answers a check only while it holds "
                "one"
            )
        if by == "check" and self.may_answer(txn, transactional_id, access_key, readable):
            return
        if transactional_id != txn.transactional_id:
            raise AccessDenied(
                f"access denied: transaction {txn.transaction_id!r} belongs to producer "
                f"{txn.transactional_id!r}; "
                + (
                    "this access key may not read its messages, so it cannot answer its check"
                    if by == "check"
                    else "only that producer ends it (another producer of the group may "
                    "answer its check requests)"
                )
            )

    # ------------------------------------------------------------ operators
    def list_open(self, producer_group: str) -> list[Transaction]:
        """Transactions of the group not ended yet (OPEN or COMMITTING), oldest first."""
        check_group_name(producer_group)
        return self._store.open_of_group(producer_group)

    def describe(self, producer_group: str, transaction_id: str) -> Transaction:
        check_group_name(producer_group)
        check_id(transaction_id, "transaction id")
        return existing(self._store, producer_group, transaction_id)
