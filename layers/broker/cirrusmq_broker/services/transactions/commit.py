"""Committing a transaction: OPEN -> COMMITTING (fenced), then the half messages are
copied into the topic and appended, then COMMITTED and the halves deleted.

Every step is idempotent: a commit that crashed at any AWS call is finished by a commit
again (or by the checker, which resumes COMMITTING transactions: :meth:`Commits.finish`)
and stores each message exactly once. Each append carries a stamp derived from the
transaction (one per chunk of at most MAX_QUEUES_PER_COMMIT_APPEND queues), so a re-run
after an append's commit is AlreadyRecorded and appends nothing twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ... import limits
from ...errors import Conflict, TopicNotFound, TransactionAlreadyEnded
from ...model import NewMessage, ProducerStamp, Topic
from ...rules import key_filter
from ...rules.transaction_state import (
    ENDED_KEEP_SECONDS,
    MAX_QUEUES_PER_COMMIT_APPEND,
    HalfObject,
    Resolution,
    Transaction,
    TxnState,
    commit_digest,
    commit_stamp_id,
    committed_name,
)
from ...storage.appends import AlreadyRecorded, QueueClosed
from ...storage.half_objects import BatchObjectGone, HalfObjectStore
from ...storage.producers import ProducerRecord, ProducerRecords
from ...storage.transactions import FenceFailed, StateChanged, TransactionStore
from ..batch_writer import BatchWriter, EncodedBatch, WrittenBatch, encode, fixed_name, rows_named
from ..topic_catalog import TopicCatalog
from ..trace import record_transaction
from .outcomes import EndResult, already_ended, changed_since, existing
from .registration import Registrations
from .rollback import Rollbacks


class Commits:
    def __init__(
        self,
        *,
        store: TransactionStore,
        halves: HalfObjectStore,
        topics: TopicCatalog,
        writer: BatchWriter,
        records: ProducerRecords,
        registrations: Registrations,
        rollbacks: Rollbacks,
        clock: Callable[[], int],
    ) -> None:
        self._store = store
        self._halves = halves
        self._topics = topics
        self._writer = writer
        self._records = records
        self._registrations = registrations
        self._rollbacks = rollbacks
        self._clock = clock

    def commit(
        self,
        txn: Transaction,
        producer: tuple[str, int] | None,
        by: str,
        access_key: str | None = None,
    ) -> EndResult:
        """Apply a commit verdict: a no-op on a committed transaction, TransactionAlreadyEnded
        on a rolled back one (or one past its topic's retention: rolled back now)."""
        if txn.state is TxnState.ROLLED_BACK:
            raise already_ended(txn, Resolution.COMMIT)
        if txn.state is TxnState.COMMITTED:
            self._halves.delete([o.key for o in txn.objects])  # a crash may have left them
            return EndResult(txn.transaction_id, txn.state, changed=False)
        if txn.state is TxnState.OPEN:
            now = self._clock()
            late = self._past_retention(txn, now)
            if late is not None:  # its half messages may be gone: never half committed
                ended = self._rollbacks.rolled_back(txn, late, "checker", producer=producer)
                raise already_ended(
                    dataclasses.replace(txn, state=ended.state, end_reason=ended.reason),
                    Resolution.COMMIT,
                )
            try:
                self._store.transition(
                    txn.producer_group,
                    txn.transaction_id,
                    expect=(TxnState.OPEN,),
                    to=TxnState.COMMITTING,
                    now=now,
                    values={
                        "commit_started_at": now,
                        "ended_by": by,
                        # the checker resumes a commit that stopped half way, not one under way
                        "next_check_at": now + max(60, txn.timings.interval_seconds) * 1000,
                    },
                    fence=producer,
                    access_key=access_key,
                    message_count=txn.message_count,
                )
            except FenceFailed:
                assert producer is not None
                self._registrations.fence(txn.producer_group, *producer, access_key)
                raise Conflict("the producer registration changed; retry") from None
            except StateChanged:  # ended, committing, or a part landed since the read
                current = existing(self._store, txn.producer_group, txn.transaction_id)
                changed_since(txn, current)
                return self.commit(current, producer, by, access_key)
            txn = dataclasses.replace(txn, state=TxnState.COMMITTING, commit_started_at=now)
        return self.finish(txn)

    def _past_retention(self, txn: Transaction, now: int) -> str | None:
        """Why the transaction cannot be committed any more (its half messages live only
        as long as the topic's retention), or None."""
        try:
            hours = self._topics.active(txn.topic).retention_hours
        except TopicNotFound:
            return None  # answered by the commit itself (topic deleted)
        if now - txn.created_at >= hours * 3600 * 1000:
            return f"undecided for longer than the topic's retention ({hours} h)"
        return None

    def finish(self, txn: Transaction) -> EndResult:
        """Copy the half messages of a COMMITTING transaction into the topic (one object per
        queue) and append them with stamps derived from the transaction (one append per
        chunk of at most MAX_QUEUES_PER_COMMIT_APPEND queues: an append is one
        TransactWriteItems of at most 100 items), mark COMMITTED, delete the halves."""
        started = txn.commit_started_at or txn.created_at
        try:
            topic = self._topics.active(txn.topic)
        except TopicNotFound:
            return self._end_deleted(txn)
        by_queue: dict[int, list[HalfObject]] = {}
        for half in txn.objects:
            by_queue.setdefault(half.queue, []).append(half)
        queues = sorted(by_queue)
        chunks = [
            queues[i : i + MAX_QUEUES_PER_COMMIT_APPEND]
            for i in range(0, len(queues), MAX_QUEUES_PER_COMMIT_APPEND)
        ]
        name = committed_name(txn.producer_group, txn.transaction_id)
        stamp_id = commit_stamp_id(txn.producer_group, txn.transaction_id)
        digest = commit_digest(txn.producer_group, txn.transaction_id)
        now = self._clock()
        for number, chunk in enumerate(chunks):
            stamp = ProducerStamp(stamp_id, number)
            try:
                batches = [
                    self._commit_batch(topic, queue, by_queue[queue], started, name)
                    for queue in chunk
                ]
            except BatchObjectGone:
                if self._recorded(stamp, digest):
                    continue  # appended before (a re-run after the halves expired)
                return self._halves_gone(txn, appended=number > 0)
            try:
                self._writer.append(
                    batches,
                    stamp=stamp,
                    build_record=lambda bases: ProducerRecord(digest, bases),
                    expires_at=now // 1000 + topic.retention_hours * 3600,
                    record_expires_at=now // 1000 + limits.IDEMPOTENCY_WINDOW_SECONDS,
                )
            except AlreadyRecorded:
                if not self._recorded(stamp, digest):
                    raise Conflict(  # never marked COMMITTED on another append's record
                        f"the commit stamp of transaction {txn.transaction_id!r} is recorded "
                        "for another append"
                    ) from None
            except QueueClosed:
                self._topics.forget(topic.name)
                return self._end_deleted(txn)
        try:
            self._store.transition(
                txn.producer_group,
                txn.transaction_id,
                expect=(TxnState.COMMITTING,),
                to=TxnState.COMMITTED,
                now=now,
                expires_at=now // 1000 + ENDED_KEEP_SECONDS,
            )
        except StateChanged:
            current = existing(self._store, txn.producer_group, txn.transaction_id)
            if current.state is not TxnState.COMMITTED:
                raise
        self._rollbacks.cleanup(txn)
        record_transaction(self._topics, topic.name, "committed", txn.transaction_id)
        return EndResult(txn.transaction_id, TxnState.COMMITTED, changed=True)

    def _commit_batch(
        self, topic: Topic, queue: int, halves: list[HalfObject], started: int, name: str
    ) -> WrittenBatch:
        """The queue's topic object of the commit. One send's half object is copied under
        the commit's name, reused by a re-run only when byte-identical (other content is
        never reused). Merged halves are encoded again, so their object is named by its
        rows too: a re-run reuses the first attempt's object even when its Parquet writer
        encoded the same rows in other bytes (the commit stamp's record prevents a
        second append)."""
        if len(halves) == 1:  # the half object itself: its row count was recorded with it
            half = halves[0]
            data = self._halves.get(half.key)
            batch = EncodedBatch(
                topic,
                queue,
                data,
                half.count,
                half.min_timestamp,
                half.max_timestamp,
                started,
                _keys_filter(data, topic, queue),
            )
            return self._writer.write(batch, fixed_name(name))
        messages = self._merged(topic, queue, halves)
        batch = encode(topic, queue, messages, stored_timestamp=started)
        return self._writer.write(batch, rows_named(f"{name}-", messages))

    def _recorded(self, stamp: ProducerStamp, digest: str) -> bool:
        """Whether the commit chunk's append is recorded as the transaction's own."""
        record = self._records.get(stamp)
        return record is not None and record.digest == digest

    def _halves_gone(self, txn: Transaction, *, appended: bool) -> EndResult:
        """A half object of a committing transaction is gone (expired with the topic's
        retention): nothing appended yet -> rolled back with the reason; else COMMITTED
        with what could be appended (the reason says so)."""
        reason = "its half messages expired (topic retention) before the commit"
        if not appended:
            self._rollbacks.rolled_back(txn, reason, "checker", expect=(TxnState.COMMITTING,))
            raise TransactionAlreadyEnded(
                f"transaction {txn.transaction_id!r} is ROLLED_BACK ({reason})",
                details={"state": TxnState.ROLLED_BACK.value, "reason": reason},
            )
        now = self._clock()
        self._store.transition(
            txn.producer_group,
            txn.transaction_id,
            expect=(TxnState.COMMITTING,),
            to=TxnState.COMMITTED,
            now=now,
            values={"end_reason": f"partly committed: {reason}"},
            expires_at=now // 1000 + ENDED_KEEP_SECONDS,
        )
        self._rollbacks.cleanup(txn)
        return EndResult(
            txn.transaction_id, TxnState.COMMITTED, True, f"partly committed: {reason}"
        )

    def _merged(self, topic: Topic, queue: int, halves: list[HalfObject]) -> list[NewMessage]:
        """Several sends routed to one queue: their messages in send order."""
        from ...codec import decode_batch

        messages = []
        for half in halves:
            data = self._halves.get(half.key)
            rows = decode_batch(data, topic=topic.name, queue=queue, base_offset=0)
            messages.extend(m.as_new() for m in rows)
        return messages

    def _end_deleted(self, txn: Transaction) -> EndResult:
        """The target topic was deleted: nothing can be delivered; roll back, recorded."""
        reason = f"the topic {txn.topic} was deleted"
        self._rollbacks.rolled_back(
            txn, reason, "checker", expect=(TxnState.OPEN, TxnState.COMMITTING)
        )
        raise TopicNotFound(f"topic {txn.topic!r} does not exist; transaction rolled back")


def _keys_filter(data: bytes, topic: Topic, queue: int) -> bytes | None:
    """The key filter of a half object's rows (decoded here: the copy keeps its bytes)."""
    from ...codec import decode_batch  # pyarrow: only for handlers that read batches

    rows = decode_batch(data, topic=topic.name, queue=queue, base_offset=0)
    return key_filter.build(k for m in rows for k in m.keys)
