"""Back-checks of undecided transactions: the checker's runs and the producers' long poll.

A checker run (:meth:`Checks.run`, the scheduled function: once a minute, and started by a
half send whose check falls due before the next one, as a delayed send starts a release
run: services/delays/wake.py) returns after one read when nothing is undecided, and after
its first pass when nothing falls due within it or another run's lease covers what does.
Otherwise it claims the run lease and loops until it ends: it passes again when the next
transaction falls due, and looks at least every second (a transaction opened meanwhile is
seen before its check is due), so a check is asked within about a second of its due time.

A pass queries the sparse due index (``open_by_due``, a few shards; no scan), and per due
transaction applies :func:`~cirrusmq_broker.rules.transaction_state.check_step`: ask the group
(count the check, add the id to the group's inbox), roll back (out of checks, past
retention, topic deleted) or finish an interrupted commit. A producer's long poll reads
its group's inbox item about once a second and claims each pending check for itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from ... import limits
from ...errors import BrokerError, InvalidRequest, TopicNotFound, TransactionAlreadyEnded
from ...model import StoredMessage
from ...rules.transaction_state import (
    CLAIM_SECONDS,
    DUE_SHARDS,
    REGISTRATION_KEEP_SECONDS,
    CheckAction,
    Transaction,
    TxnState,
    check_id,
    check_step,
    failure_backoff_seconds,
)
from ...storage.batch_objects import BatchObjectGone
from ...storage.half_objects import HalfObjectStore
from ...storage.run_leases import RunLeaseStore
from ...storage.transactions import TransactionStore
from ...validation import check_group_name
from ..delays.wake import LEASE_MARGIN_MS
from ..topic_catalog import TopicCatalog
from ..trace import TraceRecorder, request_scope
from .commit import Commits
from .registration import Registrations
from .rollback import Rollbacks

log = logging.getLogger("cirrusmq.transactions")

POLL_INTERVAL_SECONDS = 1.0
"""A producer's long poll re-reads its group's check inbox this often (one GetItem)."""
MAX_CHECKS_PER_POLL = 32
LOOK_MS = 1000
"""A looping run looks for transactions due at least this often (four small queries)."""
MIN_PAUSE_MS = 200
"""Passes of a looping run are at least this far apart."""
MAX_PENDING_CHECKS = 1000
"""A group's inbox holds at most this many pending checks (the item stays far under
400 KB); while it is full, further checks of the group wait (not counted)."""


@dataclass(frozen=True)
class CheckRequest:
    """A back-check for a producer: is this transaction committed in your application?"""

    producer_group: str
    transaction_id: str
    transactional_id: str
    topic: str
    check_number: int
    message_count: int
    message: StoredMessage
    """The transaction's first half message (offset -1: not stored in the topic yet)."""


@dataclass
class CheckReport:
    asked: int = 0
    committed: int = 0
    rolled_back: int = 0
    failed: int = 0


class Checks:
    """The back-checker's passes and the producers' polls for the checks handed to them."""

    def __init__(
        self,
        *,
        store: TransactionStore,
        halves: HalfObjectStore,
        topics: TopicCatalog,
        registrations: Registrations,
        commits: Commits,
        rollbacks: Rollbacks,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
        runs: RunLeaseStore | None = None,
        trace: Callable[[], TraceRecorder] | None = None,
    ) -> None:
        self._runs = runs
        """The run lease (None: every run that has something due loops)."""
        self._trace = trace
        """Each pass is one request of message trace: one write at most."""
        self._store = store
        self._halves = halves
        self._topics = topics
        self._registrations = registrations
        self._commits = commits
        self._rollbacks = rollbacks
        self._clock = clock
        self._sleep = sleep

    def run(
        self,
        *,
        sleep_until: Callable[[int], None],
        time_left: Callable[[], float],
        woken: bool = False,
    ) -> CheckReport:
        """Pass over the due transactions until ``time_left()`` (seconds, wall time) runs
        out (see the module's docstring); ``woken``: a half send started this run (it
        answers the pending ask before it looks). Returns the passes' totals."""
        totals = CheckReport()
        if woken and self._runs is not None:
            try:
                self._runs.run_started(self._clock())
            except (BrokerError, ClientError, BotoCoreError):  # a later send asks again
                log.exception("could not answer the checker wake; going on")
        if not self.any_undecided():
            return totals
        first = True
        while True:
            started = self._clock()
            report = self._pass()
            for name, value in dataclasses.asdict(report).items():
                setattr(totals, name, getattr(totals, name) + value)
            now = self._clock()
            left_ms = int(max(time_left(), 0) * 1000)
            if left_ms <= 0:
                return totals
            next_due = self.next_due_at(now + left_ms)
            if first:
                first = False
                if next_due is None or not self._claim_lease(now, left_ms, next_due):
                    return totals
            wake = now + LOOK_MS
            if next_due is not None:
                wake = min(wake, max(next_due, started + MIN_PAUSE_MS))
            sleep_until(min(wake, now + left_ms))

    def _pass(self) -> CheckReport:
        if self._trace is None:
            return self.run_checks()
        with request_scope(self._trace):
            return self.run_checks()

    def _claim_lease(self, now: int, left_ms: int, next_due: int) -> bool:
        """Claim the run lease until this run ends; False when a looping run covers the
        next due time already."""
        if self._runs is None:
            return True
        until = now + left_ms
        try:
            return self._runs.claim_run(until, unless_covering=next_due + LEASE_MARGIN_MS)
        except (BrokerError, ClientError, BotoCoreError):  # the lease only saves runs
            log.exception("could not claim the checker run lease; looping without it")
            return True

    def run_checks(self, *, limit: int = 100) -> CheckReport:
        """One pass of the back-checker over the transactions due now.

        A check is published (added to the group's inbox, idempotent) BEFORE it is counted:
        a failed publish counts nothing. A transaction whose step fails is pushed back with
        a growing backoff and its error recorded (it neither spins nor hides the others)."""
        now = self._clock()
        report = CheckReport()
        asked: dict[str, list[Transaction]] = {}
        for shard in range(DUE_SHARDS):
            for txn in self._store.due(f"due#{shard}", now, limit=limit):
                try:
                    self._check_one(txn, now, report, asked)
                except Exception as exc:  # the others still get their turn
                    self._failed(txn, now, report, exc)
        for group, txns in asked.items():
            try:
                published = self._store.add_pending(
                    group, [t.transaction_id for t in txns], max_pending=MAX_PENDING_CHECKS
                )
            except Exception as exc:  # none of the group's checks is counted
                for txn in txns:
                    self._failed(txn, now, report, exc)
                continue
            for txn in txns:
                if not published:
                    self._failed(txn, now, report, RuntimeError("the check inbox is full"))
                    continue
                try:
                    if self._store.ask(txn, now):
                        report.asked += 1
                except Exception as exc:
                    self._failed(txn, now, report, exc)
        return report

    def _failed(self, txn: Transaction, now: int, report: CheckReport, exc: Exception) -> None:
        report.failed += 1
        log.error(
            "check of %s/%s failed: %s", txn.producer_group, txn.transaction_id, exc, exc_info=exc
        )
        delay = failure_backoff_seconds(txn.check_failures + 1, txn.timings.interval_seconds)
        try:
            self._store.postpone(txn, now + delay * 1000, f"{type(exc).__name__}: {exc}")
        except Exception:  # the next pass retries it
            log.exception("could not postpone %s/%s", txn.producer_group, txn.transaction_id)

    def _check_one(
        self, txn: Transaction, now: int, report: CheckReport, asked: dict[str, list[Transaction]]
    ) -> None:
        try:
            retention: int | None = self._topics.active(txn.topic).retention_hours
        except TopicNotFound:
            retention = None
        step = check_step(txn, now, retention)
        if step.action is CheckAction.RESUME_COMMIT:
            try:
                self._commits.finish(txn)
                report.committed += 1
            except (TopicNotFound, TransactionAlreadyEnded):
                report.rolled_back += 1
        elif step.action is CheckAction.ROLLBACK:
            assert step.reason is not None
            try:
                self._rollbacks.rolled_back(txn, step.reason, "checker")
            except TransactionAlreadyEnded:
                return  # a verdict (a commit under way) moved it first: it stands
            report.rolled_back += 1
        elif step.action is CheckAction.ASK:
            asked.setdefault(txn.producer_group, []).append(txn)

    def any_undecided(self) -> bool:
        """Whether any transaction is undecided (one read; a checker run with none to look
        at returns after it)."""
        return self._store.any_undecided()

    def next_due_in(self, horizon_seconds: float) -> float | None:
        """Seconds until the next transaction is due within the horizon (None: none)."""
        now = self._clock()
        due = self.next_due_at(now + int(horizon_seconds * 1000))
        return None if due is None else max(0.0, (due - now) / 1000)

    def next_due_at(self, until: int) -> int | None:
        """When the next transaction is due, if at or before ``until`` (None: none)."""
        due = [
            txn.next_check_at
            for shard in range(DUE_SHARDS)
            for txn in self._store.due(f"due#{shard}", until, limit=1)
            if txn.next_check_at is not None
        ]
        return min(due) if due else None

    def poll_checks(
        self,
        producer_group: str,
        transactional_id: str,
        epoch: int,
        *,
        wait_seconds: float = 0,
        max_checks: int = 10,
        access_key: str | None = None,
        allowed: Callable[[str], bool] | None = None,
        readable: Callable[[str], bool] | None = None,
    ) -> list[CheckRequest]:
        """Long poll for check requests of the group (any live producer of it gets each
        one; a check handed out is claimed for CLAIM_SECONDS). With ``access_key`` the
        registration must be that key's; ``allowed`` (topic -> may publish) limits the
        checks handed out to transactions of topics the caller may publish to, and with
        ``access_key`` to those it may read the first message of (:meth:`may_answer`)."""
        check_group_name(producer_group)
        check_id(transactional_id, "transactional id")
        if not 0 <= wait_seconds <= limits.MAX_WAIT_SECONDS:
            raise InvalidRequest(f"wait_seconds must be 0-{limits.MAX_WAIT_SECONDS}")
        if not 1 <= max_checks <= MAX_CHECKS_PER_POLL:
            raise InvalidRequest(f"max_checks must be 1-{MAX_CHECKS_PER_POLL}")
        expires_at = self._registrations.fence(producer_group, transactional_id, epoch, access_key)
        keep_until = self._clock() // 1000 + REGISTRATION_KEEP_SECONDS
        if keep_until - expires_at > 24 * 3600:  # a live producer keeps its registration
            self._store.touch(producer_group, transactional_id, epoch, keep_until)
        owners: dict[str, str | None] = {}

        def may_take(txn: Transaction) -> bool:
            if allowed is not None and not allowed(txn.topic):
                return False  # another producer of the group (with publish on it) answers it
            return self.may_answer(txn, transactional_id, access_key, readable, owners)

        deadline = time.monotonic() + wait_seconds
        while True:
            found = self._take_checks(producer_group, max_checks, may_take, transactional_id)
            if found or time.monotonic() + POLL_INTERVAL_SECONDS > deadline:
                return found
            self._sleep(POLL_INTERVAL_SECONDS)

    def may_answer(
        self,
        txn: Transaction,
        transactional_id: str,
        access_key: str | None,
        readable: Callable[[str], bool] | None,
        owners: dict[str, str | None] | None = None,
    ) -> bool:
        """Whether the producer ``transactional_id`` signing with ``access_key`` (None: an
        admin) may be handed ``txn``'s check request (which carries its first message) and
        answer it. Any producer of the group may (RocketMQ's rule), provided it may read
        what the request carries: the transaction's own producer, a producer registered by
        the same access key, or a key that may read the topic (``readable``). ``owners``
        caches registration owners over one poll (one GetItem per other producer)."""
        if access_key is None or transactional_id == txn.transactional_id:
            return True
        if readable is not None and readable(txn.topic):
            return True
        cache = {} if owners is None else owners
        if txn.transactional_id not in cache:
            found = self._store.registration_of(txn.producer_group, txn.transactional_id)
            cache[txn.transactional_id] = found[2] if found else None
        return cache[txn.transactional_id] == access_key

    def check_outstanding(self, txn: Transaction, transactional_id: str) -> bool:
        """Whether a check of ``txn`` is handed out now (claimed, not yet answered or lapsed)
        to producer ``transactional_id`` (to any, if the claim does not record whom)."""
        if txn.claim_until < self._clock():
            return False
        return txn.claimed_by is None or txn.claimed_by == transactional_id

    def _take_checks(
        self,
        producer_group: str,
        wanted: int,
        may_take: Callable[[Transaction], bool] | None = None,
        taker: str | None = None,
    ) -> list[CheckRequest]:
        pending = self._store.pending_checks(producer_group)
        if not pending:
            return []
        ids = sorted(pending)[:100]
        txns = {t.transaction_id: t for t in self._store.get_many(producer_group, ids)}
        stale = [i for i in ids if i not in txns or txns[i].state is not TxnState.OPEN]
        if stale:
            self._store.remove_pending(producer_group, stale)
        now = self._clock()
        found = []
        for txn in sorted(txns.values(), key=lambda t: t.created_at):
            if len(found) >= wanted:
                break
            if txn.state is not TxnState.OPEN or txn.claim_until >= now or not txn.objects:
                continue
            if may_take is not None and not may_take(txn):
                continue  # another producer of the group answers it
            if self._store.claim(txn, now, now + CLAIM_SECONDS * 1000, taker):
                try:
                    found.append(self._check_request(txn))
                except BatchObjectGone:  # expired with the topic's retention: cannot commit
                    with contextlib.suppress(TransactionAlreadyEnded):
                        self._rollbacks.rolled_back(
                            txn, "its half messages expired (topic retention)", "checker"
                        )
        return found

    def _check_request(self, txn: Transaction) -> CheckRequest:
        from ...codec import decode_batch

        first = txn.objects[0]
        data = self._halves.get(first.key)
        message = decode_batch(data, topic=txn.topic, queue=first.queue, base_offset=0)[0]
        return CheckRequest(
            producer_group=txn.producer_group,
            transaction_id=txn.transaction_id,
            transactional_id=txn.transactional_id,
            topic=txn.topic,
            check_number=txn.checks,
            message_count=txn.message_count,
            message=dataclasses.replace(message, offset=-1),
        )
