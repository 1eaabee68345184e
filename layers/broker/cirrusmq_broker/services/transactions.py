"""Transactional messages: half sends, commit / rollback, back-checks, fencing.

The rules (states, check steps, routing, keys) are in
:mod:`cirrusmq_broker.rules.transaction_state`;
this module applies them to the stores. Every step is idempotent: a commit that crashed at
any AWS call is finished by a commit again (or by the checker, which resumes COMMITTING
transactions) and stores each message exactly once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import limits
from ..errors import (
    AccessDenied,
    Conflict,
    IdempotencyConflict,
    InvalidMessage,
    NotTransactional,
    ProducerFenced,
    ProducerNotRegistered,
    TopicNotFound,
    TransactionAlreadyEnded,
    TransactionNotFound,
    TransactionTooLarge,
    TransactionTopicMismatch,
)
from ..model import MessageType, NewMessage, ProducerStamp, Topic
from ..rules.transaction_state import (
    ENDED_KEEP_SECONDS,
    MAX_QUEUES_PER_COMMIT_APPEND,
    MAX_RECORDED_BYTES,
    REGISTRATION_KEEP_SECONDS,
    CheckTimings,
    HalfObject,
    HalfPart,
    Resolution,
    Transaction,
    TxnState,
    check_id,
    check_part,
    commit_digest,
    commit_stamp_id,
    committed_name,
    due_shard,
    half_key,
    part_record_size,
    route,
)
from ..storage.appends import AlreadyRecorded, QueueClosed
from ..storage.half_objects import BatchObjectGone, HalfObjectStore
from ..storage.producers import ProducerRecord, ProducerRecords
from ..storage.transactions import FenceFailed, StateChanged, TransactionStore
from ..validation import check_group_name
from .batch_writer import (
    BatchWriter,
    EncodedBatch,
    WrittenBatch,
    encode,
    fixed_name,
    rows_named,
)
from .produce import MessageInput
from .topic_catalog import TopicCatalog
from .transaction_checks import CheckReport, CheckRequest, TransactionChecks
from .transaction_input import digest as input_digest
from .transaction_input import validate_half_messages

__all__ = [
    "CheckReport",
    "CheckRequest",
    "EndResult",
    "HalfReceipt",
    "HalfSendResult",
    "TransactionService",
]

log = logging.getLogger("cirrusmq.transactions")


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


class TransactionService(TransactionChecks):
    def __init__(
        self,
        *,
        store: TransactionStore,
        halves: HalfObjectStore,
        topics: TopicCatalog,
        writer: BatchWriter,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
        records: ProducerRecords | None = None,
    ) -> None:
        self._records = records
        self._store = store
        self._halves = halves
        self._topics = topics
        self._writer = writer
        self._clock = clock
        self._sleep = sleep

    # ------------------------------------------------------------ registration
    def register(
        self,
        producer_group: str,
        transactional_id: str,
        *,
        access_key: str | None = None,
        admin: bool = False,
    ) -> int:
        """A new epoch for (producer group, transactional id): older instances are fenced.

        The registration records ``access_key``: only that key (or an admin) may register
        the id again, send, end or poll with it (AccessDenied otherwise)."""
        check_group_name(producer_group)
        check_id(transactional_id, "transactional id")
        now = self._clock()
        expires_at = now // 1000 + REGISTRATION_KEEP_SECONDS
        try:
            return self._store.register(
                producer_group,
                transactional_id,
                now,
                expires_at=expires_at,
                access_key=access_key,
                take_over=admin,
            )
        except FenceFailed:
            raise _foreign(producer_group, transactional_id) from None

    def _fence(
        self,
        producer_group: str,
        transactional_id: str,
        epoch: int,
        access_key: str | None = None,
    ) -> int:
        """Refuse a caller whose epoch is not current (or, with ``access_key``, whose key
        did not register it); returns when its registration expires."""
        found = self._store.registration_of(producer_group, transactional_id)
        current, expires_at, owner = found if found else (None, 0, None)
        if access_key is not None and owner is not None and owner != access_key:
            raise _foreign(producer_group, transactional_id)
        if current is None:
            raise ProducerNotRegistered(
                f"transactional id {transactional_id!r} is not registered in producer group "
                f"{producer_group!r}; register first"
            )
        if current != epoch:
            raise ProducerFenced(
                f"producer {transactional_id!r} epoch {epoch} was fenced by a newer "
                f"registration (epoch {current})",
                details={"epoch": epoch, "current_epoch": current},
            )
        return expires_at

    # -------------------------------------------------------------- half sends
    def send(
        self,
        producer_group: str,
        transaction_id: str,
        *,
        transactional_id: str,
        epoch: int,
        topic_name: str,
        inputs: Sequence[MessageInput],
        part: int = 0,
        timings: CheckTimings | None = None,
        access_key: str | None = None,
    ) -> HalfSendResult:
        """Store a send's messages as half messages of the transaction (opening it on its
        first send). A retried send (same part, same messages) stores nothing twice."""
        check_group_name(producer_group)
        check_id(transaction_id, "transaction id")
        check_id(transactional_id, "transactional id")
        check_part(part)
        topic = self._topics.active(topic_name)
        if topic.message_type is not MessageType.TRANSACTION:
            raise NotTransactional(
                f"topic {topic.name!r} is {topic.message_type.value}, not TRANSACTION; "
                "send without a transaction"
            )
        now = self._clock()
        messages = validate_half_messages(topic, inputs, now, transaction_id, part)
        digest = input_digest(topic.name, inputs)
        queues = route(transaction_id, [m.message_group for m in messages], topic.queues)
        by_queue: dict[int, list[NewMessage]] = {}
        for message, queue in zip(messages, queues, strict=True):
            by_queue.setdefault(queue, []).append(message)
        _check_recorded_size(producer_group, transaction_id, part, digest, messages, queues)
        if part > 0 and any(m.message_id for m in inputs):
            self._check_ids_unused(producer_group, transaction_id, part, messages)
        from ..codec import encode_batch  # pyarrow: only for handlers that write batches

        objects = []
        for queue, batch in by_queue.items():
            key = half_key(producer_group, transaction_id, part, digest, queue)
            data = encode_batch(batch, stored_timestamp=now, stamp=None)
            size = self._halves.put(key, data, retention_hours=topic.retention_hours)
            objects.append(
                HalfObject(
                    key,
                    queue,
                    len(batch),
                    size,
                    min(m.born_timestamp for m in batch),
                    max(m.born_timestamp for m in batch),
                )
            )
        half = HalfPart(
            part, digest, tuple(objects), tuple(m.message_id for m in messages), tuple(queues)
        )
        try:
            self._store.add_part(
                producer_group=producer_group,
                transaction_id=transaction_id,
                transactional_id=transactional_id,
                epoch=epoch,
                topic=topic.name,
                timings=timings or CheckTimings(),
                shard=due_shard(producer_group, transaction_id),
                part=half,
                now=now,
                access_key=access_key,
                max_recorded_bytes=MAX_RECORDED_BYTES,
            )
        except (FenceFailed, StateChanged) as exc:
            return self._refused_send(
                exc,
                producer_group,
                transaction_id,
                half,
                topic,
                (transactional_id, epoch),
                access_key,
            )
        return HalfSendResult(transaction_id, _receipts(half), duplicate=False)

    def _check_ids_unused(
        self, producer_group: str, transaction_id: str, part: int, messages: list[NewMessage]
    ) -> None:
        """A client message id of this send already in another part of the transaction is
        refused (it would be committed twice under one id). One read, only for later parts
        carrying client ids."""
        txn = self._store.get(producer_group, transaction_id)
        if txn is None:
            return
        ids = {m.message_id for m in messages}
        for other in txn.parts:
            if other.part == part:
                continue  # a retry of this part
            taken = ids.intersection(other.message_ids)
            if taken:
                raise InvalidMessage(
                    f"message id {min(taken)!r} is already in part {other.part} of "
                    f"transaction {transaction_id!r}"
                )

    def _refused_send(
        self,
        exc: Exception,
        producer_group: str,
        transaction_id: str,
        half: HalfPart,
        topic: Topic,
        producer: tuple[str, int],
        access_key: str | None = None,
    ) -> HalfSendResult:
        """Tell a retried send from a refused one; drop what a refused one wrote."""
        transactional_id, epoch = producer
        txn = self._store.get(producer_group, transaction_id)
        recorded = next((p for p in txn.parts if p.part == half.part), None) if txn else None
        if recorded is not None and recorded.digest == half.digest:
            if isinstance(exc, FenceFailed):
                self._fence(producer_group, transactional_id, epoch, access_key)
            if txn is not None and txn.ended:  # its halves were deleted: this put wrote them
                self._halves.delete([o.key for o in half.objects])
            return HalfSendResult(transaction_id, _receipts(recorded), duplicate=True)
        self._halves.delete([o.key for o in half.objects])  # named by our digest: only ours
        if isinstance(exc, FenceFailed):
            self._fence(producer_group, transactional_id, epoch, access_key)
            raise Conflict("the producer registration changed; retry")  # pragma: no cover
        assert txn is not None
        if recorded is not None:
            raise IdempotencyConflict(
                f"part {half.part} of transaction {transaction_id!r} was sent with other "
                "messages; use the next part number"
            )
        if txn.state is not TxnState.OPEN:
            raise TransactionAlreadyEnded(
                f"transaction {transaction_id!r} is {txn.state.value}; it takes no more messages",
                details={"state": txn.state.value},
            )
        if txn.topic != topic.name:
            raise TransactionTopicMismatch(
                f"transaction {transaction_id!r} sends to topic {txn.topic!r}; every message "
                "of a transaction goes to one topic"
            )
        if txn.transactional_id == transactional_id and txn.epoch == epoch:
            raise TransactionTooLarge(
                f"transaction {transaction_id!r} records {MAX_RECORDED_BYTES} bytes of "
                "message ids at most; commit it and send the rest in another transaction",
                details={"max_recorded_bytes": MAX_RECORDED_BYTES},
            )
        raise ProducerFenced(
            f"transaction {transaction_id!r} belongs to producer {txn.transactional_id!r} "
            f"epoch {txn.epoch}",
            details={"epoch": epoch, "current_epoch": txn.epoch},
        )

    # ----------------------------------------------------------------- verdicts
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
        txn = self._get(producer_group, transaction_id)
        if allowed is not None and not allowed(txn.topic):
            raise AccessDenied(f"access denied: publish to topic {txn.topic}")
        if access_key is not None and producer is not None:
            self._check_may_end(txn, producer, by, access_key, readable)
        if resolution is Resolution.UNKNOWN:
            if producer is not None:
                self._fence(producer_group, *producer, access_key)
            if txn.state is TxnState.OPEN:
                self._store.release_claim(producer_group, transaction_id)
                self._store.remove_pending(producer_group, [transaction_id])
            return EndResult(transaction_id, txn.state, changed=False)
        if resolution is Resolution.COMMIT:
            return self._commit(txn, producer, by, access_key)
        return self._rollback_verdict(txn, producer, by, access_key)

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
            self._fence(txn.producer_group, *producer, access_key)
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

    def _get(self, producer_group: str, transaction_id: str) -> Transaction:
        txn = self._store.get(producer_group, transaction_id)
        if txn is None:
            raise TransactionNotFound(
                f"no transaction {transaction_id!r} in producer group {producer_group!r}"
            )
        return txn

    def _commit(
        self,
        txn: Transaction,
        producer: tuple[str, int] | None,
        by: str,
        access_key: str | None = None,
    ) -> EndResult:
        if txn.state is TxnState.ROLLED_BACK:
            raise _already_ended(txn, Resolution.COMMIT)
        if txn.state is TxnState.COMMITTED:
            self._halves.delete([o.key for o in txn.objects])  # a crash may have left them
            return EndResult(txn.transaction_id, txn.state, changed=False)
        if txn.state is TxnState.OPEN:
            now = self._clock()
            late = self._past_retention(txn, now)
            if late is not None:  # its half messages may be gone: never half committed
                ended = self._rolled_back(txn, late, "checker", producer=producer)
                raise _already_ended(
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
                self._fence(txn.producer_group, *producer, access_key)
                raise Conflict("the producer registration changed; retry") from None
            except StateChanged:  # ended, committing, or a part landed since the read
                current = self._get(txn.producer_group, txn.transaction_id)
                _changed_since(txn, current)
                return self._commit(current, producer, by, access_key)
            txn = dataclasses.replace(txn, state=TxnState.COMMITTING, commit_started_at=now)
        return self._finish_commit(txn)

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

    def _finish_commit(self, txn: Transaction) -> EndResult:
        """Copy the half messages into the topic (one object per queue) and append them
        with stamps derived from the transaction (one append per chunk of at most
        MAX_QUEUES_PER_COMMIT_APPEND queues: an append is one TransactWriteItems of at most
        100 items), mark COMMITTED, delete the halves."""
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
                if not self._recorded(stamp, digest, missing_ok=True):
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
            current = self._get(txn.producer_group, txn.transaction_id)
            if current.state is not TxnState.COMMITTED:
                raise
        self._cleanup(txn)
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
            batch = EncodedBatch(
                topic,
                queue,
                self._halves.get(half.key),
                half.count,
                half.min_timestamp,
                half.max_timestamp,
                started,
            )
            return self._writer.write(batch, fixed_name(name))
        messages = self._merged(topic, queue, halves)
        batch = encode(topic, queue, messages, stored_timestamp=started)
        return self._writer.write(batch, rows_named(f"{name}-", messages))

    def _recorded(self, stamp: ProducerStamp, digest: str, *, missing_ok: bool = False) -> bool:
        """Whether the commit chunk's append is recorded as the transaction's own.

        Without a records store (tests building the service by hand) a chunk counts as not
        recorded (the append answers AlreadyRecorded then) unless ``missing_ok``."""
        if self._records is None:
            return missing_ok
        record = self._records.get(stamp)
        return record is not None and record.digest == digest

    def _halves_gone(self, txn: Transaction, *, appended: bool) -> EndResult:
        """A half object of a committing transaction is gone (expired with the topic's
        retention): nothing appended yet -> rolled back with the reason; else COMMITTED
        with what could be appended (the reason says so)."""
        reason = "its half messages expired (topic retention) before the commit"
        if not appended:
            self._rolled_back(txn, reason, "checker", expect=(TxnState.COMMITTING,))
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
        self._cleanup(txn)
        return EndResult(
            txn.transaction_id, TxnState.COMMITTED, True, f"partly committed: {reason}"
        )

    def _merged(self, topic: Topic, queue: int, halves: list[HalfObject]) -> list[NewMessage]:
        """Several sends routed to one queue: their messages in send order."""
        from ..codec import decode_batch

        messages = []
        for half in halves:
            data = self._halves.get(half.key)
            for m in decode_batch(data, topic=topic.name, queue=queue, base_offset=0):
                messages.append(
                    NewMessage(
                        message_id=m.message_id,
                        body=m.body,
                        tag=m.tag,
                        keys=m.keys,
                        properties=m.properties,
                        message_group=m.message_group,
                        born_timestamp=m.born_timestamp,
                        system=m.system,
                    )
                )
        return messages

    def _end_deleted(self, txn: Transaction) -> EndResult:
        """The target topic was deleted: nothing can be delivered; roll back, recorded."""
        reason = f"the topic {txn.topic} was deleted"
        self._rolled_back(txn, reason, "checker", expect=(TxnState.OPEN, TxnState.COMMITTING))
        raise TopicNotFound(f"topic {txn.topic!r} does not exist; transaction rolled back")

    def _rollback_verdict(
        self,
        txn: Transaction,
        producer: tuple[str, int] | None,
        by: str,
        access_key: str | None = None,
    ) -> EndResult:
        if txn.state is TxnState.ROLLED_BACK:
            self._halves.delete([o.key for o in txn.objects])
            return EndResult(txn.transaction_id, txn.state, changed=False, reason=txn.end_reason)
        if txn.state is not TxnState.OPEN:
            raise _already_ended(txn, Resolution.ROLLBACK)
        reason = {
            "producer": "rolled back by the producer",
            "check": "rolled back by a check's answer",
            "operator": "rolled back by an operator",
        }.get(by, f"rolled back by {by}")
        return self._rolled_back(txn, reason, by, producer=producer, access_key=access_key)

    def _rolled_back(
        self,
        txn: Transaction,
        reason: str,
        by: str,
        *,
        producer: tuple[str, int] | None = None,
        expect: tuple[TxnState, ...] = (TxnState.OPEN,),
        access_key: str | None = None,
    ) -> EndResult:
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
            self._fence(txn.producer_group, *producer, access_key)
            raise Conflict("the producer registration changed; retry") from None
        except StateChanged:
            current = self._get(txn.producer_group, txn.transaction_id)
            if current.state is TxnState.ROLLED_BACK:
                self._cleanup(current)
                return EndResult(txn.transaction_id, current.state, False, current.end_reason)
            if current.state in expect:  # a part landed since the read: discard it too
                _changed_since(txn, current)
                return self._rolled_back(
                    current, reason, by, producer=producer, expect=expect, access_key=access_key
                )
            raise _already_ended(current, Resolution.ROLLBACK) from None
        self._cleanup(txn)
        log.info(
            "transaction %s/%s rolled back: %s", txn.producer_group, txn.transaction_id, reason
        )
        return EndResult(txn.transaction_id, TxnState.ROLLED_BACK, changed=True, reason=reason)

    def _cleanup(self, txn: Transaction) -> None:
        self._halves.delete([o.key for o in txn.objects])
        if txn.checks:
            self._store.remove_pending(txn.producer_group, [txn.transaction_id])

    # ---------------------------------------------------------------- operators
    def list_open(self, producer_group: str) -> list[Transaction]:
        """Transactions of the group not ended yet (OPEN or COMMITTING), oldest first."""
        check_group_name(producer_group)
        return self._store.open_of_group(producer_group)

    def describe(self, producer_group: str, transaction_id: str) -> Transaction:
        check_group_name(producer_group)
        check_id(transaction_id, "transaction id")
        return self._get(producer_group, transaction_id)


# ---------------------------------------------------------------------- helpers


def _already_ended(txn: Transaction, wanted: Resolution) -> TransactionAlreadyEnded:
    state = "COMMITTED" if txn.state is TxnState.COMMITTING else txn.state.value
    reason = f" ({txn.end_reason})" if txn.end_reason else ""
    return TransactionAlreadyEnded(
        f"transaction {txn.transaction_id!r} is {state}{reason}; it cannot be "
        f"{'committed' if wanted is Resolution.COMMIT else 'rolled back'}",
        details={"state": state, "reason": txn.end_reason},
    )


def _changed_since(read: Transaction, current: Transaction) -> None:
    """A move conditioned on ``read`` was refused: it is retried on ``current`` only if
    that differs (another state or more parts), else Conflict (never a loop)."""
    if current.state is read.state and current.message_count == read.message_count:
        raise Conflict(f"transaction {read.transaction_id!r} changed meanwhile; retry")


def _foreign(producer_group: str, transactional_id: str) -> AccessDenied:
    return AccessDenied(
        f"access denied: transactional id {transactional_id!r} of producer group "
        f"{producer_group!r} was registered by another access key"
    )


def _check_recorded_size(
    producer_group: str,
    transaction_id: str,
    part: int,
    digest: str,
    messages: Sequence[NewMessage],
    queues: Sequence[int],
) -> None:
    """Refuse (before anything is written) a send whose part alone would pass the
    transaction's recorded-bytes limit (the sum over parts is checked by the store)."""
    keys = {q: half_key(producer_group, transaction_id, part, digest, q) for q in set(queues)}
    estimate = json.dumps(
        {
            "digest": digest,
            "objects": [
                {
                    "key": k,
                    "queue": q,
                    "count": 0,
                    "size_bytes": 2**40,
                    "min_timestamp": 2**45,
                    "max_timestamp": 2**45,
                }
                for q, k in keys.items()
            ],
            "ids": [m.message_id for m in messages],
            "queues": list(queues),
        },
        separators=(",", ":"),
    )
    if part_record_size(estimate) > MAX_RECORDED_BYTES:
        raise TransactionTooLarge(
            f"this send records {part_record_size(estimate)} bytes of message ids and "
            f"queues; a transaction records {MAX_RECORDED_BYTES} at most",
            details={"max_recorded_bytes": MAX_RECORDED_BYTES},
        )


def _receipts(part: HalfPart) -> list[HalfReceipt]:
    return [HalfReceipt(i, q) for i, q in zip(part.message_ids, part.queues, strict=True)]
