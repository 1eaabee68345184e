"""Change invisible time: one delivered message gets a new deadline and a new handle.

On a normal topic the message moves to a lease of its own (the rest of its lease keeps its
deadline); on a FIFO topic the whole lease moves, so its messages stay together and in
order, and 0 s is allowed (redeliver at once, to the lock owner only: a failing orderly
listener's retry). A group whose redelivery is immediate (SQS) may set 0 s on any topic:
the message is receivable again at once. SQS's FIFO queues (``per_group``) move the message
alone on a FIFO topic too: each message of a group has its own visibility."""

from __future__ import annotations

from collections.abc import Callable

from ... import limits
from ...errors import (
    AccessDenied,
    InvalidDuration,
    MessageNotFound,
    ReceiptHandleExpired,
    TooManyInflight,
)
from ...model import MessageType, ReceivedMessage
from ...rules.group_state import GroupQueueState, Lease, single_lease_id
from ...rules.retries import is_internal
from ...storage.groups import GroupStateStore
from ...validation import check_group_name
from .. import optimistic
from ..offset_lookup import OffsetLookup
from ..receipt_handles import ReceiptHandles, denied
from ..retries import RetryTopic
from ..retries.settings import RetrySettings
from .queue_plan import QueuePlanner


class InvisibleTime:
    def __init__(
        self,
        *,
        states: GroupStateStore,
        lookup: OffsetLookup,
        handles: ReceiptHandles,
        retry_topic: RetryTopic,
        settings: RetrySettings,
        clock: Callable[[], int],
        planner: QueuePlanner | None = None,
    ) -> None:
        self._states = states
        self._planner = planner
        self._settings = settings
        self._lookup = lookup
        self._handles = handles
        self._retry_topic = retry_topic
        self._clock = clock

    def change_invisible(
        self,
        group: str,
        receipt_handle: str,
        invisible_seconds: int,
        may_consume: Callable[[str], bool] | None = None,
        *,
        per_group: bool = False,
        latest: bool = False,
    ) -> ReceivedMessage:
        """Set one message's invisible time to now + ``invisible_seconds``; a new handle.
        AccessDenied if ``may_consume(topic)`` refuses the handle's topic. ``per_group``
        (a FIFO delivery of a receive that held each group on its own): the message moves
        alone, its delivery's other messages keep their time. ``latest`` (SQS: a handle of
        any receive names the message; normal topics only): a handle whose lease was
        redelivered since acts on the lease the message is leased under now."""
        check_group_name(group)
        handle = self._handles.decode(group, receipt_handle)
        if may_consume is not None and not may_consume(handle.topic):
            raise AccessDenied(denied(group, handle.topic))
        fifo = self._retry_topic.resolve(handle.topic).message_type is MessageType.FIFO
        if not (fifo and 0 <= invisible_seconds <= limits.MAX_INVISIBLE_SECONDS):
            check_invisible(invisible_seconds, self._settings.min_invisible_seconds, group)

        def change(_: int) -> ReceivedMessage | optimistic.Conflict:
            state = self._states.load_one(group, handle.topic, handle.queue)
            if state.open_leases >= 2 * limits.MAX_LEASES_PER_QUEUE:
                self._states.load_leases(state)
                state.refresh()
                if state.open_leases >= 2 * limits.MAX_LEASES_PER_QUEUE:
                    raise TooManyInflight(
                        "too many messages in flight on this queue; ack some first"
                    )
            if handle.lease_id not in state.leases:
                self._states.load_lease(state, handle.lease_id)
            lease_id = handle.lease_id
            parent = state.leases.get(lease_id)
            if parent is not None and handle.offset in parent.moved:
                # an earlier change moved it to a lease of its own: the first handle still
                # names it (an ack follows the same way), so a client may keep using it
                lease_id = single_lease_id(lease_id, handle.offset)
                if lease_id not in state.leases:
                    self._states.load_lease(state, lease_id)
            deadline = self._clock() + invisible_seconds * 1000
            whole = fifo and not per_group  # a FIFO delivery moves whole (orderly)
            lease = state.change_invisible(lease_id, handle.offset, deadline=deadline, whole=whole)
            if lease is None and latest and not fifo:  # a FIFO delivery: its own handles only
                current = self._current_lease(state, handle.offset)
                if current is not None:  # fenced on that lease as read, as any change
                    lease = state.change_invisible(
                        current.lease_id, handle.offset, deadline=deadline, whole=whole
                    )
            if lease is None:
                raise ReceiptHandleExpired(
                    "the receipt handle is stale: the message was acked or redelivered since"
                )
            if not self._states.save(state):
                return optimistic.CONFLICT
            if fifo and self._planner is not None:  # its delivery may end sooner now
                self._planner.delivery_ended(group, handle.topic, handle.queue)
            found = self._lookup.messages_at(
                state.topic, state.queue, [handle.offset], now_s=self._clock() // 1000
            )
            message = found.messages.get(handle.offset)
            if message is None:
                raise MessageNotFound("the message is past its retention")
            received = self._handles.received(state, message, lease, traced=handle.traced)
            if is_internal(handle.topic):
                return self._retry_topic.present(received)  # shown as the original
            return received

        return optimistic.update(
            change, exhausted=optimistic.busy("the group state is contended; retry")
        )

    def _current_lease(self, state: GroupQueueState, offset: int) -> Lease | None:
        """The open lease ``offset`` is leased under now, or None (settled, or not leased).

        The leases read already come first: reading the handle's slot loaded what is stored
        there now, which holds the message when it was redelivered in place. Otherwise one
        query reads the leases covering the offset (its range lease and its own)."""
        for lease in state.leases.values():
            if lease.holds(offset):
                return lease
        covering = self._states.leases_covering_each(state, [offset])
        for lease in covering[offset]:
            if lease.holds(offset):
                return state.leases.setdefault(lease.lease_id, lease)
        return None


def check_invisible(
    seconds: int, minimum: Callable[[str], int] | None = None, group: str = ""
) -> None:
    """InvalidDuration unless ``seconds`` is an invisible time a delivery may have: from
    ``MIN_INVISIBLE_SECONDS``, or from ``minimum(group)`` (the group's own shortest, asked
    only for a shorter time)."""
    lowest = limits.MIN_INVISIBLE_SECONDS
    if seconds < lowest and minimum is not None:
        lowest = minimum(group)
    if not lowest <= seconds <= limits.MAX_INVISIBLE_SECONDS:
        raise InvalidDuration(f"invisible_seconds must be {lowest}-{limits.MAX_INVISIBLE_SECONDS}")
