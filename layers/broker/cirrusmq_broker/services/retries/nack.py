"""Nack ("reconsume later"): the consumer gives received messages back now. Each goes to
the retry topic at the next backoff level (or the smallest level of at least the delay
asked for), or to the DLQ after the group's last attempt, and is settled in its lease. On a
FIFO topic a message not dead stays in place: its lease's deadline is moved to the delay's
end, and it is delivered again then, in order.

Idempotency: per queue and target one append (whatever the number of leases) stamped with
the lease id and offset of its first message, its digest naming every (lease, offset); a
resend of the same nack is AlreadyRecorded and only settles. A resend naming other offsets
(after a crash between append and settle) moves each message on its own instead (a message
may then be delivered once more; none is lost). The append carries the settle of each lease
it forwards from, conditional on the lease as read (see lease_expiry.py for the fence).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from ... import limits
from ...errors import InvalidDuration, InvalidRequest, ReceiptHandleExpired, TopicNotFound
from ...model import MessageType, StoredMessage, Topic
from ...rules.group_state import GroupQueueState, Lease
from ...rules.receipts import ReceiptHandle
from ...rules.retries import MAX_NACK_DELAY_SECONDS, RETRY_QUEUES, Target, target_for
from ...storage.appends import ExtraItemRejected
from ...storage.groups import GroupStateStore
from ...validation import check_group_name
from .. import optimistic
from ..offset_lookup import OffsetLookup
from ..receipt_handles import AckStatus, NackOutcome, ReceiptHandles
from .retry_topic import RetryTopic
from .settings import RetrySettings

MAX_LEASES_PER_MOVE = 45
"""Leases one nack append settles in its transaction (DynamoDB takes 100 items; the append
itself takes three, each lease one or two: its settle, and its moved mark if deleted)."""
NACK_MARGIN_SECONDS = 3
"""A nack of a lease this close to its deadline (or past it) answers ``expired``: the
lease's expiry is about to move its messages on (both moves are fenced on the lease, so only
one of them would; this margin only spares the nack a lost race)."""


class Nacks:
    def __init__(
        self,
        *,
        retry_topic: RetryTopic,
        settings: RetrySettings,
        lookup: OffsetLookup,
        states: GroupStateStore,
        handles: ReceiptHandles,
        clock: Callable[[], int],
    ) -> None:
        self._retry_topic = retry_topic
        self._settings = settings
        self._lookup = lookup
        self._states = states
        self._handles = handles
        self._clock = clock

    def nack(
        self,
        group: str,
        receipt_handles: list[str],
        delay_seconds: int | None = None,
        may_consume: Callable[[str], bool] | None = None,
    ) -> list[NackOutcome]:
        """Give messages back (see the module doc); one outcome per handle, in order: its
        status is ``acked`` (given back: the receipt handle is done), ``expired`` or
        ``invalid`` like an ack's. A lease within ``NACK_MARGIN_SECONDS`` of its deadline
        answers ``expired``: its expiry moves the messages."""
        check_group_name(group)
        if not 1 <= len(receipt_handles) <= limits.MAX_ACK_HANDLES:
            raise InvalidRequest(f"nack takes 1-{limits.MAX_ACK_HANDLES} receipt handles")
        if delay_seconds is not None and (
            isinstance(delay_seconds, bool) or not 0 <= delay_seconds <= MAX_NACK_DELAY_SECONDS
        ):
            raise InvalidDuration(f"delay_seconds must be 0-{MAX_NACK_DELAY_SECONDS}")
        invalid, by_lease = self._handles.by_lease(group, receipt_handles, may_consume)
        outcomes = {
            p: NackOutcome(receipt_handles[p], AckStatus.INVALID, error)
            for p, error in invalid.items()
        }
        by_queue: dict[tuple[str, int], dict[str, dict[int, ReceiptHandle]]] = {}
        for (topic_name, queue, lease_id), handles in by_lease.items():
            by_queue.setdefault((topic_name, queue), {})[lease_id] = handles
        for (topic_name, queue), leases in by_queue.items():
            try:
                topic = self._retry_topic.resolve(topic_name)
            except TopicNotFound as exc:
                for handles in leases.values():
                    for p in handles:
                        outcomes[p] = NackOutcome(receipt_handles[p], AckStatus.INVALID, exc)
                continue
            done = self._nack_queue(group, topic, queue, leases, delay_seconds)
            for p, status in done.items():
                error = (
                    ReceiptHandleExpired(
                        "the receipt handle is stale: the message was acked or redelivered since"
                    )
                    if status is AckStatus.EXPIRED
                    else None
                )
                outcomes[p] = NackOutcome(receipt_handles[p], status, error)
        return [outcomes[p] for p in range(len(receipt_handles))]

    def _nack_queue(
        self,
        group: str,
        topic: Topic,
        queue: int,
        leases: dict[str, dict[int, ReceiptHandle]],
        delay_seconds: int | None,
    ) -> dict[int, AckStatus]:
        """Nack the handles of one queue: one append per target for all its leases (the
        digest names each lease's offsets), carrying the settle of each lease conditional
        on the lease as read; a lease changed meanwhile makes the nack read them again."""
        statuses = {p: AckStatus.EXPIRED for handles in leases.values() for p in handles}
        given_back: set[tuple[str, int]] = set()

        def give_back(_: int) -> bool | optimistic.Conflict:
            state = self._states.load_one(group, topic.name, queue)
            margin = self._clock() + NACK_MARGIN_SECONDS * 1000
            live: dict[str, tuple[Lease, list[int]]] = {}
            for lease_id, handles in leases.items():
                lease = self._states.load_lease(state, lease_id) if state.version else None
                if lease is None:
                    continue
                for p, h in handles.items():
                    if h.offset in lease.acked or h.offset in lease.gone:
                        statuses[p] = AckStatus.ACKED  # settled, or given back by a nack
                if lease.deadline <= margin:
                    continue  # expiring: its expiry moves the messages
                held = sorted({h.offset for h in handles.values() if lease.holds(h.offset)})
                if held:
                    live[lease_id] = (lease, held)
            if not live or self._give_back(state, topic, live, delay_seconds, given_back):
                return True
            return optimistic.CONFLICT

        optimistic.update(give_back, exhausted=lambda: False)
        for lease_id, handles in leases.items():
            for p, h in handles.items():
                if (lease_id, h.offset) in given_back:
                    statuses[p] = AckStatus.ACKED
        return statuses

    def _give_back(
        self,
        state: GroupQueueState,
        topic: Topic,
        live: dict[str, tuple[Lease, list[int]]],
        delay_seconds: int | None,
        given_back: set[tuple[str, int]],
    ) -> bool:
        """Move the ``live`` (lease, offsets) on; False if a lease changed since it was
        read (what moved before that stays moved, in ``given_back``)."""
        group, queue = state.group, state.queue
        wanted = sorted({o for _, held in live.values() for o in held})
        found = self._lookup.messages_at(topic.name, queue, wanted, now_s=self._clock() // 1000)
        maximum = self._settings.max_delivery_attempts(group)
        fifo = topic.message_type is MessageType.FIFO
        by_target: dict[Target, list[tuple[StoredMessage, Lease]]] = {}
        in_place: dict[str, list[int]] = {}
        expired: dict[str, list[int]] = {}
        for lease_id, (lease, held) in live.items():
            for offset in held:
                message = found.messages.get(offset)
                if message is None:
                    if offset in found.expired:
                        expired.setdefault(lease_id, []).append(offset)
                    continue
                target = target_for(
                    message, lease.attempt, maximum, nacked=True, delay_seconds=delay_seconds
                )
                if fifo and not target.dead:
                    in_place.setdefault(lease_id, []).append(offset)
                else:
                    by_target.setdefault(target, []).append((message, lease))
        current = {lease_id: lease for lease_id, (lease, _) in live.items()}
        for target, pairs in sorted(by_target.items(), key=lambda kv: kv[0].number):
            pairs.sort(key=lambda pair: pair[0].offset)
            for chunk in _by_leases(pairs, MAX_LEASES_PER_MOVE):
                if not self._give_back_chunk(state, topic, target, chunk, current, expired):
                    return False
                given_back.update((lease.lease_id, m.offset) for m, lease in chunk)
        for lease_id, offsets in expired.items():  # past retention, nothing to move
            after = current[lease_id].moved_on([], offsets)
            if not self._states.settle(state, current[lease_id], after):
                return False
            current[lease_id] = after
            given_back.update((lease_id, o) for o in offsets)
        for lease_id, keep in in_place.items():
            self._suspend(state, current[lease_id], delay_seconds)
            given_back.update((lease_id, o) for o in keep)
        return True

    def _give_back_chunk(
        self,
        state: GroupQueueState,
        topic: Topic,
        target: Target,
        pairs: list[tuple[StoredMessage, Lease]],
        current: dict[str, Lease],
        expired: dict[str, list[int]],
    ) -> bool:
        """One append of ``pairs`` (message, lease as first read) with the settle of each
        of their leases (as ``current`` has it) in its transaction; False if one changed."""
        group, queue = state.group, state.queue
        first_message, first_lease = pairs[0]
        producer = f"~nack.{group}.{topic.name}#{queue}.{first_lease.lease_id}"
        named = [(lease.lease_id, m.offset) for m, lease in pairs]
        digest = hashlib.sha256(f"{producer}#{target.number}#{named}".encode()).hexdigest()
        afters: dict[str, Lease] = {}
        for lease_id in dict.fromkeys(lease_id for lease_id, _ in named):
            forwarded = [o for lid, o in named if lid == lease_id]
            afters[lease_id] = current[lease_id].moved_on(forwarded, expired.pop(lease_id, []))
        fence = [
            request
            for x in afters
            for request in self._states.settle_requests(state, current[x], afters[x])
        ]
        try:
            recorded = self._retry_topic.move(
                group, topic, target, [m for m, _ in pairs], [x.attempt for _, x in pairs],
                producer, sequence=first_message.offset * (RETRY_QUEUES + 1) + target.number,
                digest=digest, fence=fence,
            )  # fmt: skip
        except ExtraItemRejected:
            return False
        if recorded is not None:  # this very move was made before: settle what it moved
            if recorded != digest:
                return False
            for lease_id, after in afters.items():
                if not self._states.settle(state, current[lease_id], after):
                    return False
        current.update(afters)
        return True

    def _suspend(self, state: GroupQueueState, lease: Lease, delay: int | None) -> None:
        """FIFO: the lease ends after ``delay`` (at least 10 s): then it is delivered again
        in place, in order, with its attempt increased."""
        seconds = max(delay or 0, limits.MIN_INVISIBLE_SECONDS)

        def postpone(_: int) -> None | optimistic.Conflict:
            fresh = self._states.load_one(state.group, state.topic, state.queue)
            current = self._states.load_lease(fresh, lease.lease_id)
            if current is None:
                return None
            fresh.postpone(current.lease_id, self._clock() + seconds * 1000)
            return None if self._states.save(fresh) else optimistic.CONFLICT

        optimistic.update(postpone, exhausted=lambda: None)


def _by_leases(
    pairs: list[tuple[StoredMessage, Lease]], limit: int
) -> list[list[tuple[StoredMessage, Lease]]]:
    """``pairs`` in runs that name at most ``limit`` leases each (one transaction each)."""
    chunks: list[list[tuple[StoredMessage, Lease]]] = []
    leases: set[str] = set()
    for pair in pairs:
        if not chunks or (pair[1].lease_id not in leases and len(leases) >= limit):
            chunks.append([])
            leases = set()
        chunks[-1].append(pair)
        leases.add(pair[1].lease_id)
    return chunks
