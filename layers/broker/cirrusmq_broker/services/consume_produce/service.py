"""Exactly-once consume -> produce: a step acks the receipt handles a stage read and appends
the messages it produced in ONE DynamoDB transaction, or does neither.

The step's transaction is an append of the one append path (``BatchWriter`` ->
``storage/appends.py``) with these items (at most ``MAX_STEP_ITEMS``, DynamoDB's limit):

- per output queue: the queue head's advance and the index item (2), as every append;
- the step's idempotency record (1): stamped with a producer id derived from the producer
  group, transactional id and epoch, and the step's sequence;
- the producer's fence (1): its registration is still at the step's epoch;
- per lease acked (1): a conditional delete (the step acks everything the lease delivered)
  or ``ADD`` to its settled set, on the lease's id, its deadline and nothing of it moved;
- per delayed (queue, due second) (1): the delay items.

Before the transaction it writes one batch object per output queue (named by the stamp, the
step's digest and the rows, so a retry reuses it) and a delay object per topic with delayed
messages. A step refused or dying before its commit leaves those batch objects unindexed:
no reader sees them, and the orphan sweeper deletes them (services/janitor.py); a refused
step's delay objects are deleted at once.

A committed step keeps its producer's registration (as a poll for checks does, at most once a
day per process): a stage that only commits steps never polls, and a registration that
expired is deleted, after which the id would register again at epoch 1.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable

from ... import limits
from ...errors import (
    AccessDenied,
    Busy,
    Conflict,
    IdempotencyConflict,
    InvalidMessage,
    InvalidRequest,
    LeaseMovedOn,
    StepTooLarge,
    StorageUnavailable,
    Throttled,
    TopicNotFound,
)
from ...model import MessageInput, ProducerStamp, SendReceipt
from ...rules.group_state import delivered_count, is_inline, lease_slot
from ...rules.transaction_state import REGISTRATION_KEEP_SECONDS
from ...storage.appends import AlreadyRecorded, ExtraItemRejected, QueueClosed
from ...storage.groups import GroupStateStore
from ...storage.producers import ProducerRecord, ProducerRecords
from ...storage.transactions import TransactionStore
from ..batch_writer import BatchWriter, WrittenBatch, encode, rows_named
from ..delays.schedule import DelayWriter, due_times
from ..delays.wake import ReleaseWake
from ..message_validation import validate_messages
from ..produce import route, split_delayed, stamp_queue
from ..receipt_handles import ReceiptHandles
from ..topic_catalog import TopicCatalog
from ..trace import record_sent, record_settled
from ..transactions.registration import Registrations
from .plan import (
    MAX_STEP_ITEMS,
    STEP_FIXED_ITEMS,
    Output,
    Step,
    StepResult,
    check,
    delay_items,
    in_order,
    merged,
    recorded_digest,
    step_digest,
    step_producer_id,
)

KEPT_PRODUCERS_MAX = 10_000
"""Registrations whose last refresh a process remembers (then it forgets them all)."""


class ConsumeProduceSteps:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        writer: BatchWriter,
        producers: ProducerRecords,
        states: GroupStateStore,
        handles: ReceiptHandles,
        registrations: Registrations,
        transactions: TransactionStore,
        clock: Callable[[], int],
        delay_writer: DelayWriter | None = None,
        wake: ReleaseWake | None = None,
        delivery_ended: Callable[[str, str, int], None] | None = None,
    ) -> None:
        self._topics = topics
        self._writer = writer
        self._producers = producers
        self._states = states
        self._handles = handles
        self._registrations = registrations
        self._transactions = transactions
        self._clock = clock
        self._delay_writer = delay_writer
        self._wake = wake
        self._delivery_ended = delivery_ended
        self._kept: dict[tuple[str, str, int], int] = {}
        """(producer group, transactional id, epoch) -> the expiry this process last set."""

    def commit(
        self,
        step: Step,
        *,
        may_consume: Callable[[str], bool] | None = None,
        may_publish: Callable[[str], bool] | None = None,
        access_key: str | None = None,
        scope: str = "",
    ) -> StepResult:
        """Ack the step's handles and append its outputs in one transaction.

        Refused, with nothing appended or acked: a bad request (4xx, before anything is
        written), StepTooLarge, LeaseMovedOn (a handle's lease expired, was redelivered or
        had a message moved out or on), ProducerFenced / ProducerNotRegistered, and
        IdempotencyConflict (the step's sequence was committed with other contents). A
        retry of a committed step answers its first result (``duplicate``).

        ``access_key``: the key that must have registered the producer (None: any, an
        admin); ``scope``: the calling key, which the step's idempotency record is kept for.
        """
        check(step)
        stamp = ProducerStamp(
            step_producer_id(step.producer_group, step.transactional_id, step.epoch),
            step.sequence,
            scope,
        )
        now = self._clock()
        invalid, by_lease = self._handles.by_lease(
            step.group, list(step.receipt_handles), may_consume
        )
        if invalid:
            raise invalid[min(invalid)]
        lease_items = []
        slots: set[tuple[str, int, object]] = set()
        for (topic, queue, lease_id), handles in by_lease.items():
            # one item per lease, but the summary's lease, whichever it is, is one item too
            slot = (topic, queue, None if is_inline(lease_id) else lease_slot(lease_id))
            if slot in slots:  # one item, two deliveries: only the later one is current
                raise LeaseMovedOn(
                    "the step acks two deliveries of one lease: the earlier one moved on; "
                    "nothing was appended",
                    details={"receipt_handles": sorted(handles)},
                )
            slots.add(slot)
            offsets = sorted({h.offset for h in handles.values()})
            item = self._states.acks.step_request(step.group, topic, queue, lease_id, offsets, now)
            if item is None:
                raise InvalidRequest(f"receipt handle of an unknown lease {lease_id[:40]!r}")
            lease_items.append(item)
        merged_outputs, order = merged(step.outputs)
        outputs = [
            self._planned(name, inputs, now, stamp, may_publish) for name, inputs in merged_outputs
        ]
        self._check_size(outputs, len(lease_items))
        digest = step_digest(step)
        delay_keys, delay_puts = self._schedule(outputs, now, stamp, digest)
        try:
            batches = self._write(outputs, now, stamp, digest)
        except BaseException:
            self._discard(delay_keys)
            raise
        fence = self._transactions.fence_request(
            step.producer_group, step.transactional_id, step.epoch, access_key
        )
        streams = [(b.pending.topic, b.pending.queue) for b in batches]
        try:
            bases = self._writer.append_streams(
                batches,
                stamp=stamp,
                build_record=lambda got: ProducerRecord(
                    recorded_digest(digest, streams),
                    {i: got[s] for i, s in enumerate(streams)},
                    now,
                ),
                expires_at={
                    o.topic.name: now // 1000 + o.topic.retention_hours * 3600 for o in outputs
                },
                record_expires_at=now // 1000 + limits.IDEMPOTENCY_WINDOW_SECONDS,
                extra_items=[fence, *lease_items, *delay_puts],
            )
        except AlreadyRecorded:
            self._discard(delay_keys)
            first = self._recorded(step, stamp, digest, merged_outputs, order)
            self._due(first.receipts)  # the first attempt may have died before its wake
            return first
        except ExtraItemRejected as exc:
            self._discard(delay_keys)
            raise self._refusal(step, exc.positions, list(by_lease.values()), access_key) from None
        except QueueClosed as exc:
            self._discard(delay_keys)
            for o in outputs:
                self._topics.forget(o.topic.name)
            raise TopicNotFound("an output topic of the step was deleted") from exc
        except Busy:
            self._discard(delay_keys)
            raise
        receipts = [o.receipts({q: bases[(o.topic.name, q)] for q in o.now_part}) for o in outputs]
        self._tidy(step.group, by_lease)
        self._keep(step, now)
        for o, rs in zip(outputs, receipts, strict=True):
            record_sent(o.topic, o.messages, rs, stamp.producer_id)
        record_settled("acked", self._topics, (h for hs in by_lease.values() for h in hs.values()))
        result = StepResult(in_order(receipts, order), len(step.receipt_handles), False)
        self._due(result.receipts)
        return result

    # ---------------------------------------------------------------- planning
    def _planned(
        self,
        name: str,
        inputs: list[MessageInput],
        now: int,
        stamp: ProducerStamp,
        may_publish: Callable[[str], bool] | None,
    ) -> Output:
        # The permission before the lookup: a 404 would tell the key which topics exist.
        if may_publish is not None and not may_publish(name):
            raise AccessDenied(f"access denied: this access key may not publish to {name}")
        topic = self._topics.active(name)
        messages = validate_messages(
            topic, inputs, now, lambda p: f"{stamp.producer_id}.{stamp.sequence}.{name}.{p}"
        )
        dues = due_times(topic, inputs, now)
        routed = route(topic, messages, lambda: stamp_queue(topic, stamp))
        now_part, later = split_delayed(routed, messages, dues)
        return Output(topic, inputs, messages, now_part, later)

    def _check_size(self, outputs: list[Output], leases: int) -> None:
        """StepTooLarge unless the step's items fit one transaction (nothing written yet)."""
        queues = sum(len(o.now_part) for o in outputs)
        delayed = sum(delay_items(o) for o in outputs)
        items = 2 * queues + STEP_FIXED_ITEMS + leases + delayed
        if items > MAX_STEP_ITEMS:
            raise StepTooLarge(
                f"this step needs {items} transaction items (2 per output queue: {queues}; 1 "
                f"per lease acked: {leases}; 1 per delayed queue and due second: "
                f"{delayed}; {STEP_FIXED_ITEMS} of its own); one step holds at most "
                f"{MAX_STEP_ITEMS}: use fewer message groups or acks per step",
                details={
                    "items": items,
                    "max_items": MAX_STEP_ITEMS,
                    "output_queues": queues,
                    "leases": leases,
                    "delay_items": delayed,
                },
            )

    # ---------------------------------------------------------------- writing
    def _schedule(
        self, outputs: list[Output], now: int, stamp: ProducerStamp, digest: str
    ) -> tuple[list[str], list[dict]]:
        """Write the delay object of each output with delayed messages: keys, item puts."""
        keys: list[str] = []
        puts: list[dict] = []
        for o in outputs:
            if not o.later:
                continue
            if self._delay_writer is None:
                self._discard(keys)
                raise InvalidMessage("this service takes no delayed messages")
            try:
                key, items = self._delay_writer.write(o.topic, o.later, now, stamp, digest)
            except BaseException:
                self._discard(keys)
                raise
            keys.append(key)
            puts.extend(items)
        return keys, puts

    def _write(
        self, outputs: list[Output], now: int, stamp: ProducerStamp, digest: str
    ) -> list[WrittenBatch]:
        """One batch object per output queue, named so that a retry of the step reuses it."""
        scope = hashlib.sha256(f"{stamp.scope}#{digest}".encode()).hexdigest()[:16]
        prefix = f"{stamp.producer_id}-{stamp.sequence}-{scope}-"
        return [
            self._writer.write(
                encode(o.topic, queue, ms, stored_timestamp=now, stamp=stamp),
                rows_named(prefix, ms),
            )
            for o in outputs
            for queue, ms in o.now_part.items()
        ]

    def _discard(self, delay_keys: list[str]) -> None:
        if self._delay_writer is not None:
            for key in delay_keys:
                self._delay_writer.discard(key)

    # ---------------------------------------------------------------- outcomes
    def _recorded(
        self,
        step: Step,
        stamp: ProducerStamp,
        digest: str,
        outputs_by_topic: list[tuple[str, list[MessageInput]]],
        order: list[tuple[int, int]],
    ) -> StepResult:
        """The first result of a step committed before (routed again as it was then)."""
        record = self._producers.get(stamp)
        conflict = IdempotencyConflict(
            f"step {step.sequence} of producer {step.transactional_id!r} (epoch "
            f"{step.epoch}) was committed with other contents or to output topics with other "
            "queues; use a new sequence"
        )
        if record is None:
            raise conflict
        first = record.scheduled_at or self._clock()
        outputs = [
            self._planned(name, inputs, first, stamp, None) for name, inputs in outputs_by_topic
        ]
        streams = [(o.topic.name, queue) for o in outputs for queue in o.now_part]
        if record.digest != recorded_digest(digest, streams):
            raise conflict
        receipts, position = [], 0
        for o in outputs:
            bases = {}
            for queue in o.now_part:
                bases[queue] = record.bases[position]
                position += 1
            receipts.append(o.receipts(bases))
        return StepResult(in_order(receipts, order), len(step.receipt_handles), True)

    def _refusal(
        self,
        step: Step,
        positions: list[int],
        leases: list[dict],
        access_key: str | None,
    ) -> Exception:
        """Why the step's transaction was refused: its fence (0), a lease (1..), else."""
        if 0 in positions:
            self._registrations.fence(
                step.producer_group, step.transactional_id, step.epoch, access_key
            )  # raises ProducerFenced, ProducerNotRegistered or AccessDenied
            return Conflict("the producer registration changed during the step; retry")
        moved = [p for p in positions if 1 <= p <= len(leases)]
        if moved:
            handles = sorted(i for p in moved for i in leases[p - 1])
            return LeaseMovedOn(
                "the step acks messages its consumer no longer holds (a lease expired, was "
                "redelivered, or a message of it was nacked or moved out): nothing was "
                "appended; the messages come back",
                details={"receipt_handles": handles},
            )
        return Busy("a delay item of the step was taken meanwhile; retry the step")

    def _tidy(self, group: str, by_lease: dict) -> None:
        """After the commit: a lease the step acked in part is deleted if nothing of it is
        left unsettled (the plain ack's ``ADD`` again, a no-op on its set, then its
        conditional delete; if storage refuses, the next read of the lease finds it settled
        and removes it); a FIFO queue may serve again."""
        for (topic, queue, lease_id), handles in by_lease.items():
            offsets = sorted({h.offset for h in handles.values()})
            if delivered_count(lease_id) != len(offsets):  # acked in part
                # the step is committed: its answer does not wait for the tidying
                with contextlib.suppress(Throttled, StorageUnavailable):
                    self._states.acks.ack(group, topic, queue, lease_id, offsets)
            if self._delivery_ended is not None:
                self._delivery_ended(group, topic, queue)

    def _keep(self, step: Step, now: int) -> None:
        """Keep the registration of a producer that committed a step (conditional on its
        epoch), once a day per process; a failure leaves it to a later step."""
        producer = (step.producer_group, step.transactional_id, step.epoch)
        keep_until = now // 1000 + REGISTRATION_KEEP_SECONDS
        if keep_until - self._kept.get(producer, 0) <= 24 * 3600:
            return
        try:
            self._transactions.touch(*producer, keep_until)
        except (Throttled, StorageUnavailable):
            return  # the step is committed: a later step keeps the registration
        if len(self._kept) >= KEPT_PRODUCERS_MAX:
            self._kept.clear()
        self._kept[producer] = keep_until

    def _due(self, receipts: list[SendReceipt]) -> None:
        """Wake a release run for delayed messages due before the next scheduled one."""
        dues = [r.delivery_timestamp for r in receipts if r.delivery_timestamp is not None]
        if dues and self._wake is not None and self._delay_writer is not None:
            self._wake.due_at(dues, self._delay_writer.items.runs)
