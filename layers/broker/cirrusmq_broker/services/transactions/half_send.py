"""Half sends: a transaction's messages stored as half objects (not in the topic yet),
recorded as a part of the transaction item (opening it on its first send).

A retried send (same part, same messages) stores nothing twice: its half objects are
named by the request's digest, and the part's record tells a retry from a refused send.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

from ...errors import (
    Conflict,
    DelayNotAllowed,
    IdempotencyConflict,
    InvalidMessage,
    NotTransactional,
    ProducerFenced,
    TransactionAlreadyEnded,
    TransactionTooLarge,
    TransactionTopicMismatch,
)
from ...model import MessageInput, MessageType, NewMessage, SystemFields, Topic
from ...rules.transaction_state import (
    MAX_RECORDED_BYTES,
    CheckTimings,
    HalfObject,
    HalfPart,
    TxnState,
    check_id,
    check_part,
    due_shard,
    half_key,
    part_record_size,
    route,
)
from ...storage.half_objects import HalfObjectStore
from ...storage.transactions import FenceFailed, StateChanged, TransactionStore, encode_part
from ...validation import check_group_name
from ..message_validation import validate_messages
from ..topic_catalog import TopicCatalog
from ..trace import record_half_sent
from .outcomes import HalfReceipt, HalfSendResult
from .registration import Registrations


class HalfSends:
    def __init__(
        self,
        *,
        store: TransactionStore,
        halves: HalfObjectStore,
        topics: TopicCatalog,
        registrations: Registrations,
        clock: Callable[[], int],
        wake: Callable[[list[int]], None] | None = None,
    ) -> None:
        self._store = store
        self._halves = halves
        self._topics = topics
        self._registrations = registrations
        self._clock = clock
        self._wake = wake
        """Told when an opened transaction's first check falls due: starts a checker run
        if none covers it (never raises)."""

    def check(self, topic_name: str, inputs: Sequence[MessageInput]) -> None:
        """Raise what :meth:`send` would raise for the topic and the messages themselves,
        storing nothing: a caller that registers a producer just for one send checks first,
        so a refused send leaves no registration (the topic is read from the cache)."""
        topic = self.transactional_topic(topic_name)
        validate_half_messages(topic, inputs, self._clock(), "check", 0)

    def transactional_topic(self, topic_name: str) -> Topic:
        """The active TRANSACTION topic ``topic_name`` (from the catalog's cache);
        TopicNotFound or NotTransactional otherwise."""
        topic = self._topics.active(topic_name)
        if topic.message_type is not MessageType.TRANSACTION:
            raise NotTransactional(
                f"topic {topic.name!r} is {topic.message_type.value}, not TRANSACTION; "
                "send without a transaction"
            )
        return topic

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
        topic = self.transactional_topic(topic_name)
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
        from ...codec import encode_batch  # pyarrow: only for handlers that write batches

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
            result = self._refused_send(
                exc,
                producer_group,
                transaction_id,
                half,
                topic,
                (transactional_id, epoch),
                access_key,
            )
            self._first_check_due(part, now, timings)  # the first may have died before it
            return result
        record_half_sent(topic, messages, queues, transaction_id, transactional_id)
        self._first_check_due(part, now, timings)
        return HalfSendResult(transaction_id, _receipts(half), duplicate=False)

    def _first_check_due(self, part: int, now: int, timings: CheckTimings | None) -> None:
        """The transaction's first send opened it: its first check is due after the
        immunity (a later part leaves that time as it is)."""
        if part == 0 and self._wake is not None:
            self._wake([now + (timings or CheckTimings()).immunity_seconds * 1000])

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
        fence = self._registrations.fence
        txn = self._store.get(producer_group, transaction_id)
        recorded = next((p for p in txn.parts if p.part == half.part), None) if txn else None
        if recorded is not None and recorded.digest == half.digest:
            if isinstance(exc, FenceFailed):
                fence(producer_group, transactional_id, epoch, access_key)
            if txn is not None and txn.ended:  # its halves were deleted: this put wrote them
                self._halves.delete([o.key for o in half.objects])
            return HalfSendResult(transaction_id, _receipts(recorded), duplicate=True)
        self._halves.delete([o.key for o in half.objects])  # named by our digest: only ours
        if isinstance(exc, FenceFailed):
            fence(producer_group, transactional_id, epoch, access_key)
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


def validate_half_messages(
    topic: Topic, inputs: Sequence[MessageInput], now: int, transaction_id: str, part: int
) -> list[NewMessage]:
    """The send's messages, validated as any send's (a half message is never delayed);
    those sent without an id get one derived from (transaction, part, position)."""
    for position, raw in enumerate(inputs):
        if raw.delay_level is not None or raw.delivery_timestamp is not None:
            raise DelayNotAllowed(  # RocketMQ has no delayed transactional messages either
                f"message {position}: a transactional message cannot be delayed"
            )
    return validate_messages(
        topic,
        inputs,
        now,
        lambda position: generated_id(transaction_id, part, position),
        SystemFields(transaction_id=transaction_id),
    )


def generated_id(transaction_id: str, part: int, position: int) -> str:
    """The same on every retry of the send."""
    return "T" + hashlib.sha256(f"{transaction_id}#{part}#{position}".encode()).hexdigest()[:31]


def input_digest(topic: str, inputs: Sequence[MessageInput]) -> str:
    """A fingerprint of the send, to tell a retried part from another use of its number."""
    h = hashlib.sha256(topic.encode())
    for m in inputs:
        h.update(hashlib.sha256(m.body).digest())
        h.update(
            json.dumps(
                [
                    m.message_id,
                    m.tag,
                    list(m.keys),
                    sorted(m.properties.items()),
                    m.message_group,
                    m.born_timestamp,
                ],
                separators=(",", ":"),
            ).encode()
        )
    return h.hexdigest()


def _check_recorded_size(
    producer_group: str,
    transaction_id: str,
    part: int,
    digest: str,
    messages: Sequence[NewMessage],
    queues: Sequence[int],
) -> None:
    """Refuse (before anything is written) a send whose part alone would pass the
    transaction's recorded-bytes limit (the sum over parts is checked by the store). The
    part is measured as the store encodes it, with the widest numbers its objects record."""
    keys = {q: half_key(producer_group, transaction_id, part, digest, q) for q in set(queues)}
    estimate = HalfPart(
        part,
        digest,
        tuple(HalfObject(k, q, 0, 2**40, 2**45, 2**45) for q, k in keys.items()),
        tuple(m.message_id for m in messages),
        tuple(queues),
    )
    size = part_record_size(encode_part(estimate))
    if size > MAX_RECORDED_BYTES:
        raise TransactionTooLarge(
            f"this send records {size} bytes of message ids and "
            f"queues; a transaction records {MAX_RECORDED_BYTES} at most",
            details={"max_recorded_bytes": MAX_RECORDED_BYTES},
        )


def _receipts(part: HalfPart) -> list[HalfReceipt]:
    return [HalfReceipt(i, q) for i, q in zip(part.message_ids, part.queues, strict=True)]
