"""Ack: settle delivered messages by their receipt handles.

Fast path, per lease the handles name: one conditional delete when they name every message
it delivered, else one conditional ``ADD`` (and a delete of a lease left settled). Only
when a condition fails (the lease changed: a redelivery, a move, a change of invisible
time) does the slow path read the queue's summary and the leases around the offsets to
sort the handles out: settled ones are acked, ones whose message was moved on or
redelivered since are expired.
"""

from __future__ import annotations

from collections.abc import Callable

from ... import limits
from ...errors import BrokerError, InvalidRequest, ReceiptHandleExpired, StorageContended
from ...rules.group_state import GroupQueueState, Lease, delivered_count, single_lease_id
from ...rules.receipts import ReceiptHandle
from ...storage.groups import GroupStateStore, LeaseAck
from ...validation import check_group_name
from .. import optimistic
from ..receipt_handles import AckOutcome, AckStatus, LeaseKey, ReceiptHandles, moved_on
from ..retries import LeaseExpiry
from .queue_plan import QueuePlanner

MAX_ACK_QUEUES = 100
"""Queues one ack may touch."""


class Acks:
    def __init__(
        self,
        *,
        states: GroupStateStore,
        handles: ReceiptHandles,
        expiry: LeaseExpiry,
        planner: QueuePlanner,
        clock: Callable[[], int],
    ) -> None:
        self._states = states
        self._handles = handles
        self._expiry = expiry
        self._planner = planner
        self._clock = clock

    def ack(
        self,
        group: str,
        receipt_handles: list[str],
        may_consume: Callable[[str], bool] | None = None,
        before_slow_path: Callable[[], None] | None = None,
        *,
        within_visibility: bool = False,
    ) -> list[AckOutcome]:
        """Ack every valid handle; one outcome per handle, in order.

        ``may_consume(topic)`` (the caller's permission) is asked per handle: a handle for a
        topic it refuses is ``invalid`` (AccessDenied) and acks nothing. ``before_slow_path``
        runs before anything but a whole-lease delete (the API claims the request's nonce
        there: a replayed ack costs one failed write, then is refused).

        Acking a message acked before succeeds; a stale or invalid handle does not stop
        the others.

        ``within_visibility`` (SQS FIFO queues): a handle whose message's invisible time
        has passed is ``expired`` (the ack's writes are conditional on it), even when the
        message was not delivered again since.
        """
        alive_at = self._clock() if within_visibility else None
        invalid, by_lease = self._checked(group, receipt_handles, may_consume)
        outcomes = {
            p: AckOutcome(receipt_handles[p], AckStatus.INVALID, error)
            for p, error in invalid.items()
        }
        states: dict[tuple[str, int], GroupQueueState] = {}
        # leases acked whole (an SQS FIFO delete of many groups: one lease per group):
        # deleted together, a transaction per 100, not a call per lease
        whole = [key for key, handles in by_lease.items() if _names_all(key[2], handles)]
        try:
            settled = (
                self._states.acks.settle_whole(group, whole, alive_at=alive_at)
                if len(whole) > 1
                else set()
            )
        except StorageContended:  # another write held an item: each lease on its own
            settled = set()
        for (topic, queue, lease_id), handles in by_lease.items():
            if (topic, queue, lease_id) in settled:
                pending = handles
            else:
                pending = self._ack_lease(
                    group, (topic, queue, lease_id), handles, receipt_handles, outcomes,
                    states, before_slow_path, alive_at,
                )  # fmt: skip
            self._planner.delivery_ended(group, topic, queue)  # a FIFO delivery may be over
            for position in pending:
                outcomes.setdefault(
                    position, AckOutcome(receipt_handles[position], AckStatus.ACKED)
                )
        return [outcomes[p] for p in range(len(receipt_handles))]

    def check(
        self,
        group: str,
        receipt_handles: list[str],
        may_consume: Callable[[str], bool] | None = None,
    ) -> None:
        """Raise what :meth:`ack` would refuse the whole request for (InvalidRequest: 0 or
        more than 1,000 handles, more than 100 queues), reading and writing nothing: a
        receive carrying acks checks them so before it records or leases anything."""
        self._checked(group, receipt_handles, may_consume)

    def _checked(
        self,
        group: str,
        receipt_handles: list[str],
        may_consume: Callable[[str], bool] | None,
    ) -> tuple[dict[int, BrokerError], dict[LeaseKey, dict[int, ReceiptHandle]]]:
        """The request-level checks, then the handles decoded (:meth:`ReceiptHandles.by_lease`)."""
        check_group_name(group)
        if not 1 <= len(receipt_handles) <= limits.MAX_ACK_HANDLES:
            raise InvalidRequest(f"ack takes 1-{limits.MAX_ACK_HANDLES} receipt handles")
        invalid, by_lease = self._handles.by_lease(group, receipt_handles, may_consume)
        if len({(topic, queue) for topic, queue, _ in by_lease}) > MAX_ACK_QUEUES:
            raise InvalidRequest(
                f"one ack spans at most {MAX_ACK_QUEUES} queues",
                details={"max_queues": MAX_ACK_QUEUES},  # a client splits the request
            )
        return invalid, by_lease

    def _ack_lease(
        self,
        group: str,
        lease: LeaseKey,
        pending: dict[int, ReceiptHandle],
        texts: list[str],
        outcomes: dict[int, AckOutcome],
        states: dict[tuple[str, int], GroupQueueState],
        before_slow_path: Callable[[], None] | None,
        alive_at: int | None = None,
    ) -> dict[int, ReceiptHandle]:
        """Ack the handles of one lease: the fast path, else the slow path's sorting out,
        again while the lease keeps changing under it; the handles left to count acked."""
        topic, queue, lease_id = lease

        def settle(_: int) -> dict[int, ReceiptHandle] | optimistic.Conflict:
            nonlocal pending
            offsets = sorted({h.offset for h in pending.values()})
            try:
                done = self._states.acks.ack(
                    group, topic, queue, lease_id, offsets, before_add=before_slow_path,
                    alive_at=alive_at,
                )  # fmt: skip
            except StorageContended:  # a transaction held an item: what the ack wrote
                return optimistic.CONFLICT  # before stands, and it goes again (idempotent)
            if done is not None:
                stale = done.stale | self._moved_on_alone(group, topic, queue, done)
                for position, handle in pending.items():
                    if handle.offset in stale:
                        outcomes[position] = moved_on(texts[position])
                return pending
            if before_slow_path is not None:
                before_slow_path()
            pending = self._sort_out(group, pending, texts, outcomes, states, alive_at)
            if not pending:
                return pending
            states.pop((topic, queue), None)  # it raced a change: read again
            return optimistic.CONFLICT

        return optimistic.update(
            settle,
            exhausted=optimistic.busy("the group state is contended; retry the ack"),
            backoff=True,
        )

    def _moved_on_alone(self, group: str, topic: str, queue: int, done: LeaseAck) -> set[int]:
        """Of the offsets whose lease of its own (change_invisible) was gone at the ack,
        those a move (its expiry, a nack) forwarded, by the moved marks of those leases
        (one batched read); the others were acked by their own handle."""
        if not done.vanished:
            return set()
        marks = self._states.moved_marks(group, topic, queue, done.vanished.values())
        return {
            offset for offset, single in done.vanished.items() if offset in marks.get(single, ())
        }

    def _sort_out(
        self,
        group: str,
        pending: dict[int, ReceiptHandle],
        texts: list[str],
        outcomes: dict[int, AckOutcome],
        states: dict[tuple[str, int], GroupQueueState],
        alive_at: int | None = None,
    ) -> dict[int, ReceiptHandle]:
        """After a failed ack of one lease's handles: settle already-acked and stale
        handles; the rest stay. ``alive_at``: a handle whose lease (or the message's lease
        of its own) is past its deadline then is expired.

        An offset below the committed bound, or that no open lease holds, was settled (or
        moved on: its expiry, a nack or an in-place redelivery says which); one that a
        lease under another id holds was redelivered since (the handle is stale). The
        leases around the offsets are read in two queries, and which messages the lease's
        expiry moved on in one pass (records, originals and each moved batch read once),
        however many handles there are.
        """
        handles = list(pending.values())
        topic, queue, lease_id = handles[0].topic, handles[0].queue, handles[0].lease_id
        if (topic, queue) not in states:
            states[(topic, queue)] = self._states.load_one(group, topic, queue)
        state = states[(topic, queue)]
        settled_below = min(state.committed, state.cursor) if state.version else 0
        looked_up = [h.offset for h in handles if settled_below <= h.offset < state.cursor]
        covering = (
            self._states.leases_covering_each(state, looked_up)
            if state.version and looked_up
            else {}
        )
        moved: set[int] | None = None

        def settled(position: int, offset: int) -> AckOutcome:
            """Acked, unless the lease's expiry or a nack moved the message on."""
            nonlocal moved
            if moved is None:  # the lease's moves, read once for all its handles
                offsets = [h.offset for h in handles]
                moved = self._expiry.moved_offsets(group, topic, queue, lease_id, offsets)
            if offset in moved:
                return moved_on(texts[position])
            return AckOutcome(texts[position], AckStatus.ACKED)

        still: dict[int, ReceiptHandle] = {}
        for position, handle in pending.items():
            if state.version and handle.offset < settled_below:
                outcomes[position] = settled(position, handle.offset)
                continue
            around = covering.get(handle.offset)
            own = next((x for x in around or () if x.lease_id == handle.lease_id), None)
            if own is not None and alive_at is not None:
                verdict = _within_visibility(own, around or [], handle.offset, alive_at)
                if verdict == "settled":
                    outcomes[position] = settled(position, handle.offset)
                    continue
                if verdict == "expired":
                    outcomes[position] = AckOutcome(
                        texts[position],
                        AckStatus.EXPIRED,
                        ReceiptHandleExpired(
                            "the receipt handle is stale: its invisible time has passed"
                        ),
                    )
                    continue
            if own is not None:
                still[position] = handle  # its lease is live: the ack raced a change
            elif around is not None and not any(x.holds(handle.offset) for x in around):
                outcomes[position] = settled(position, handle.offset)
            else:
                outcomes[position] = AckOutcome(
                    texts[position],
                    AckStatus.EXPIRED,
                    ReceiptHandleExpired(
                        "the receipt handle is stale: the message was redelivered since"
                    ),
                )
        return still


def _within_visibility(own: Lease, around: list[Lease], offset: int, alive_at: int) -> str:
    """An ack within visibility of ``offset`` through its handle's lease ``own``: "settled"
    (acked or moved on before), "expired" (the lease holding it is past its deadline at
    ``alive_at``), else "live" (the ack goes again)."""
    holder: Lease | None = own
    if offset in own.moved:  # moved out by change_invisible: its lease of its own
        single = single_lease_id(own.lease_id, offset)
        holder = next((x for x in around if x.lease_id == single), None)
        if holder is None:
            return "live"  # its own lease is gone: the ack sorts that out
    elif not own.holds(offset):
        return "settled"
    return "expired" if holder.deadline <= alive_at else "live"


def _names_all(lease_id: str, handles: dict[int, ReceiptHandle]) -> bool:
    """Whether ``handles`` name every offset delivered under ``lease_id``."""
    offsets = {h.offset for h in handles.values()}
    return bool(offsets) and delivered_count(lease_id) == len(offsets)
