"""Consume: receive under a lease, ack, change invisible duration, subscribe, describe.

A receive first reads, in one batched call, every queue's head, the group's summary on every
queue and the group's subscription: that tells which queues have unread messages or may
have expired leases for the group, and only those are touched (an idle poll costs that one
read; a queue's lease items are queried only when a deadline may have passed or flow
control may bind). It takes those queues in turn: each call starts at the next queue and moves on
until ``max_messages`` (or the response byte budget) is reached, so every queue is served
first once every N calls and none starves behind a busy one. Per queue it delivers expired
leases first, then new messages from the cursor, and writes the queue's summary and the
leases it creates or changes in one transaction (small items: the cost does not grow with
what is in flight). A long poll repeats the batched read about once a second and returns
within its wait.
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from .. import limits
from ..errors import (
    AccessDenied,
    BrokerError,
    Busy,
    ForeignReceiptHandle,
    InvalidDuration,
    InvalidRequest,
    MessageNotFound,
    ReceiptHandleExpired,
    StorageUnavailable,
    SubscriptionConflict,
    Throttled,
    TooManyInflight,
)
from ..model import (
    GroupQueueStatus,
    IndexEntry,
    MessageType,
    ReceivedMessage,
    StoredMessage,
    Topic,
)
from ..rules import orderly
from ..rules.filters import TagFilter
from ..rules.group_state import GroupQueueState, Lease
from ..rules.membership import ClientIdInUse, Membership, check_client_id
from ..rules.receipts import InvalidReceiptHandle, ReceiptHandle, ReceiptSigner
from ..rules.retries import is_internal
from ..storage.group_states import GroupStateStore, LeaseAck
from ..storage.group_views import GroupView, GroupViewReader
from ..storage.log_index import LogIndex
from ..storage.queue_heads import QueueHead, QueueHeads
from ..validation import check_group_name, check_topic_name
from .batch_reader import BatchReader
from .offset_lookup import Found, OffsetLookup
from .retries import RetryService
from .topic_catalog import TopicCatalog

RESPONSE_BYTE_BUDGET = limits.MAX_REQUEST_BYTES - 256 * 1024
"""What the messages of one receive response may take, as serialized (:func:`wire_size`)."""
MESSAGE_OVERHEAD_BYTES = 1536
"""One message's field names, numbers and receipt handle as serialized (the longest group
and topic names make a retry delivery's handle, which names ``retry.<group>.<topic>``,
about 900 bytes)."""
MAX_SCAN_PER_QUEUE = 2000
"""Messages one receive examines per queue (bounds work when a filter skips most)."""
POLL_INTERVAL_SECONDS = 1.0
"""A long poll re-reads the heads this often: about one read per second while idle."""
POLL_MARGIN_SECONDS = 0.3
"""A long poll stops starting new work this long before its wait ends."""
FLOW_RECHECK_SECONDS = 5.0
"""A queue at its flow-control limit has its leases re-read at most this often."""
MIN_PASS_SECONDS = 2.0
"""A pass over the queues may always take this long (a receive without a wait still fills
from several queues); after that, or after the wait, it answers with what it has."""
MAX_OVERRUN_SECONDS = 3.0
"""A pass that found nothing yet may take on more queues this long past its deadline; a
long poll so ends far under the 30 s HTTP API timeout."""
SAVE_ATTEMPTS = 6
MAX_ACK_QUEUES = 100
"""Queues one ack may touch."""
FIFO_RECHECK_SECONDS = 1.0
"""A FIFO queue seen with a delivery in flight has its leases re-read at most this often
(an ack through the same process clears that at once)."""
FIFO_RECHECK_MAX_SECONDS = 2.0
"""... doubling up to this while the same delivery stays in flight (a slow orderly batch
does not cost a lease query per second for its whole invisible time)."""
MAX_LEASES_PER_PASS = 40
"""Expired leases one pass redelivers per queue: each is at most two items of the queue's
write transaction (DynamoDB takes 100). With retries only a FIFO queue redelivers in place,
one delivery at a time, which adds the trace of the lease id it supersedes."""


def wire_size(message: StoredMessage) -> int:
    """An upper bound of the bytes ``message`` takes in a receive response: its base64 body
    and its text fields as JSON strings (non-ASCII escaped as ``\\uXXXX``, what the API's
    serializer writes) inside the Lambda response, which escapes each quote and backslash
    of the body once more."""
    body = 4 * ((len(message.body) + 2) // 3)
    texts = [
        message.message_id,
        message.topic,
        message.tag or "",
        message.message_group or "",
        *message.keys,
        *message.properties.keys(),
        *message.properties.values(),
    ]
    return body + sum(map(json_text_bytes, texts)) + MESSAGE_OVERHEAD_BYTES


def json_text_bytes(text: str) -> int:
    """Bytes of ``text`` as a JSON string (ASCII-only) within a JSON string."""
    if text.isascii() and text.isprintable():  # the usual case, without an encoding pass
        escaped = text.count('"') + text.count("\\")
        return len(text) + 4 + 3 * escaped
    encoded = json.dumps(text)
    return len(encoded) + encoded.count("\\") + encoded.count('"')


@dataclass
class QueuePlan:
    """What one queue could deliver now."""

    redeliveries: list[tuple[Lease, list[StoredMessage]]] = field(default_factory=list)
    missing: dict[str, list[int]] = field(default_factory=dict)
    """Leased offsets past retention, by lease id: they settle without a delivery."""
    new: list[tuple[StoredMessage, bool]] = field(default_factory=list)
    """Messages from the cursor on, with whether they pass the filter."""
    skip_to: int = 0
    """Nothing retained lies below this offset: the cursor may jump here."""
    scan_end: int = 0
    """Offset after the last message examined."""
    entries: list[IndexEntry] = field(default_factory=list)

    def deliverable(self) -> list[StoredMessage]:
        again = [m for _, messages in self.redeliveries for m in messages]
        return again + [m for m, wanted in self.new if wanted]

    def base_for(self, offset: int) -> int:
        """The base offset of the batch holding ``offset`` (itself at a batch boundary)."""
        for entry in self.entries:
            if entry.base_offset <= offset < entry.next_offset:
                return entry.base_offset
        return offset


class AckStatus(StrEnum):
    ACKED = "acked"
    """Settled now or before (acking an acked message succeeds)."""
    EXPIRED = "expired"
    """The lease ended (the message was or will be delivered again): it was not acked."""
    INVALID = "invalid"
    """Forged, corrupt, or another group's handle."""


@dataclass(frozen=True)
class AckOutcome:
    """What an ack did with one receipt handle."""

    receipt_handle: str
    status: AckStatus
    error: BrokerError | None = None


class ConsumeService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        heads: QueueHeads,
        reader: BatchReader,
        states: GroupStateStore,
        views: GroupViewReader,
        signer: ReceiptSigner,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
        retries: RetryService | None = None,
    ) -> None:
        self._topics = topics
        self._index = index
        self._heads = heads
        self._reader = reader
        self._states = states
        self._views = views
        self._signer = signer
        self._clock = clock
        self._sleep = sleep
        self._starts: dict[str, itertools.count[int]] = {}
        self._flow_checked: dict[tuple[str, str, int], float] = {}
        """(group, topic, queue) → when its leases were last read for flow control (s)."""
        self._fifo_busy: dict[tuple[str, str, int], tuple[float, int, float]] = {}
        """FIFO queue → (re-read its leases after (monotonic), the delivery's deadline (ms),
        the current re-read interval (s): doubles while the same delivery stays in flight)."""
        """(group, topic, queue) of a FIFO topic → until when it is known busy: (monotonic s,
        the in-flight lease's deadline on the broker's clock), whichever comes first."""
        self._lock = threading.Lock()
        self._lookup = OffsetLookup(index, reader)
        self._retries = retries
        """Issue 9 (retries): expired leases move to the retry topic, which receive serves."""

    # ================================================================ receive
    def receive(
        self,
        group: str,
        topic_name: str,
        *,
        filter_expression: str = "*",
        max_messages: int = limits.DEFAULT_RECEIVE_MESSAGES,
        invisible_seconds: int = limits.DEFAULT_INVISIBLE_SECONDS,
        wait_seconds: float = 0,
        client_id: str | None = None,
        access_key: str | None = None,
    ) -> list[ReceivedMessage]:
        """Deliver up to ``max_messages``, waiting up to ``wait_seconds`` for the first.

        On a FIFO topic the receive is orderly (orderly.py): ``client_id`` names the consumer
        that takes the queues' locks; without it, only unlocked queues are served and no lock
        is taken. A client id registered by another ``access_key`` (None: an admin, who may
        act for any) is ClientIdInUse: nobody takes another key's consumer's queues."""
        check_group_name(group)
        if client_id is not None:
            check_client_id(client_id)
        tag_filter = TagFilter.parse(filter_expression)
        if not 1 <= max_messages <= limits.MAX_RECEIVE_MESSAGES:
            raise InvalidRequest(f"max_messages must be 1-{limits.MAX_RECEIVE_MESSAGES}")
        _check_invisible(invisible_seconds)
        if not 0 <= wait_seconds <= limits.MAX_WAIT_SECONDS:
            raise InvalidDuration(f"wait_seconds must be 0-{limits.MAX_WAIT_SECONDS}")
        topic = self._topics.active(topic_name)
        give_up = time.monotonic() + wait_seconds
        recorded = False
        fifo = topic.message_type is MessageType.FIFO
        while True:
            view = self._views.read(group, topic.name, topic.queues, members=fifo)
            _check_client_owner(view.members, client_id, access_key, self._clock())
            if view.subscription is None and recorded:
                view.subscription = tag_filter.expression
            self._check_subscription(group, topic.name, tag_filter, view.subscription)
            recorded = True  # checked on every pass: a changed subscription stops this poll
            received = []
            if self._retries is not None:  # retries: due retry messages of this topic first
                received = self._retries.serve(
                    group, topic, tag_filter, max_messages, invisible_seconds, give_up,
                    self._receive_once,
                )  # fmt: skip
            if len(received) < max_messages:  # one response: the retry part counts too
                used = sum(wire_size(r.message) for r in received)
                received += self._receive_once(
                    view, topic, tag_filter, max_messages - len(received), invisible_seconds,
                    give_up, client_id, bytes_left=RESPONSE_BYTE_BUDGET - used,
                    holding=bool(received),
                )  # fmt: skip
            remaining = give_up - time.monotonic() - POLL_MARGIN_SECONDS
            if received or remaining <= 0:
                return received
            self._sleep(min(POLL_INTERVAL_SECONDS, remaining))

    def _check_subscription(
        self, group: str, topic: str, tag_filter: TagFilter, subscribed: str | None
    ) -> None:
        """Record the group's filter on its first receive; refuse another filter later."""
        wanted = tag_filter.expression
        if subscribed is None:
            if self._states.subscribe(group, topic, wanted, only_if_new=True):
                return
            subscribed = self._states.subscription(group, topic)
        if subscribed is not None and subscribed != wanted:
            raise SubscriptionConflict(
                f"group {group!r} is subscribed to topic {topic!r} with filter {subscribed!r}, "
                f"not {wanted!r}; change the subscription first",
                details={"topic": topic, "subscribed": subscribed, "requested": wanted},
            )

    def subscribe(self, group: str, topic_name: str, filter_expression: str) -> str:
        """Set the group's filter on a topic (from the cursor on); returns its canonical text."""
        check_group_name(group)
        expression = TagFilter.parse(filter_expression).expression
        topic = self._topics.active(topic_name)
        self._states.subscribe(group, topic.name, expression, only_if_new=False)
        return expression

    def _receive_once(
        self,
        view: GroupView,
        topic: Topic,
        tag_filter: TagFilter,
        budget: int,
        invisible_s: int,
        give_up: float,
        client_id: str | None = None,
        *,
        bytes_left: int = RESPONSE_BYTE_BUDGET,
        holding: bool = False,
    ) -> list[ReceivedMessage]:
        """One pass over the queues with work. ``holding``: the caller has leased messages
        for this response already, so the pass ends at its deadline whatever it found
        (they must not sit invisible while the caller gives up on the answer)."""
        now = self._clock()
        deadline = max(give_up, time.monotonic() + MIN_PASS_SECONDS)
        queues = [q for q in self._rotation(topic) if _has_work(view, q, now)]
        fifo = topic.message_type is MessageType.FIFO
        members = view.members or Membership(view.states[0].group)
        if fifo:  # orderly: only the queues this client may hold, with nothing in flight
            queues = [q for q in queues if self._fifo_ready(view, topic, q, client_id, now)]
        received: list[ReceivedMessage] = []
        for q in queues:
            wanted = budget - len(received)
            late = time.monotonic() - deadline
            held = holding or bool(received)
            if wanted <= 0 or bytes_left <= 0 or late > MAX_OVERRUN_SECONDS or (held and late > 0):
                break  # full, or out of time: answer with what there is
            now = self._clock()
            end = view.heads[q].next_offset
            if self._retries is not None:  # retries: expired leases go to the retry topic
                until = deadline if held else deadline + MAX_OVERRUN_SECONDS
                expired = self._retries.expire(view.states[q], topic, now, until)
                if expired is None:
                    continue  # retries: contended expiry, this queue waits for the next pass
                view.states[q] = expired
            plan = self._plan(view.states[q], tag_filter, wanted, now, end, fifo=fifo)
            count, used = _fitting(plan.deliverable(), bytes_left, first=not held)
            try:
                taken = self._take(
                    view.states[q],
                    plan,
                    count,
                    tag_filter,
                    now,
                    invisible_s * 1000,
                    end,
                    orderly_for=(client_id, members, topic.queues) if fifo else None,
                )
            except Busy:
                continue  # other consumers of the group hold this queue: serve the others
            except (StorageUnavailable, Throttled):
                if received:
                    break  # hand out what is leased already rather than let it sit invisible
                raise
            received.extend(taken)
            bytes_left -= used
        return received

    def _rotation(self, topic: Topic) -> list[int]:
        """All queues, starting from a different one each call (no queue starves another)."""
        with self._lock:
            counter = self._starts.setdefault(
                topic.name, itertools.count(random.randrange(topic.queues))
            )
            start = next(counter) % topic.queues
        return [(start + i) % topic.queues for i in range(topic.queues)]

    def _flow_recheck(self, state: GroupQueueState) -> bool:
        """Whether a queue held by flow control may have its leases read again now.

        Acks do not touch the summary, so only the leases tell whether they freed room;
        reading them is rate-limited per queue, so a queue at its limit does not cost a
        lease query on every poll.
        """
        key = (state.group, state.topic, state.queue)
        now = self._clock() / 1000
        with self._lock:
            if now - self._flow_checked.get(key, -FLOW_RECHECK_SECONDS) < FLOW_RECHECK_SECONDS:
                return False
            self._flow_checked[key] = now
            if len(self._flow_checked) > 10_000:
                self._flow_checked.clear()
        return True

    def _fifo_ready(
        self, view: GroupView, topic: Topic, queue: int, client_id: str | None, now: int
    ) -> bool:
        """Whether a FIFO queue may serve ``client_id`` now (its lock, the allocation, and
        no delivery in flight); reads the queue's leases when the summary cannot tell,
        at most every FIFO_RECHECK_SECONDS while a delivery is in flight."""
        state = view.states[queue]
        members = view.members or Membership(state.group)
        verdict = orderly.may_serve(state, client_id, members, topic.queues, now)
        if not verdict.allowed and (not verdict.in_flight_decides or state.complete):
            return False  # another consumer's queue: decided without reading leases
        if not state.complete and state.open_leases > 0:
            key = (state.group, state.topic, state.queue)
            with self._lock:
                until, deadline, interval = self._fifo_busy.get(key, (0.0, 0, 0.0))
                if until > time.monotonic() and deadline > now:
                    return False
            self._states.load_leases(state)
            state.refresh()
            live = [
                lease.deadline
                for lease in state.leases.values()
                if lease.unsettled() and lease.deadline > now
            ]
            if live:
                with self._lock:
                    if len(self._fifo_busy) > 10_000:
                        self._fifo_busy.clear()
                    # the same delivery still in flight: re-read less often (acks through
                    # this process clear the entry; the deadline ends the wait in any case)
                    interval = (
                        min(interval * 2, FIFO_RECHECK_MAX_SECONDS)
                        if deadline == min(live)
                        else FIFO_RECHECK_SECONDS
                    )
                    self._fifo_busy[key] = (time.monotonic() + interval, min(live), interval)
                return False
        return orderly.may_serve(state, client_id, members, topic.queues, now).allowed

    def _plan(
        self,
        state: GroupQueueState,
        tag_filter: TagFilter,
        budget: int,
        now: int,
        end: int,
        *,
        fifo: bool = False,
    ) -> QueuePlan:
        if not state.complete and (
            (fifo and state.open_leases > 0)
            or state.may_have_expired(now)
            or (_flow_bound(state) and self._flow_recheck(state))
        ):
            self._states.load_leases(state)  # the cheap bounds say: look at the leases
        state.refresh()  # acks since the last save may have freed flow control
        plan = QueuePlan(scan_end=state.cursor)
        wanted = budget
        expired, allow_new = state.expired_leases(now)[:MAX_LEASES_PER_PASS], True
        if fifo:  # one delivery in flight per queue: the oldest expired one, else new ones
            expired, allow_new = orderly.gate(state, now)
        elif self._retries is not None:
            expired = []  # retries: expiry moves them on (with backoff); the rest next pass
        for lease in expired:
            if wanted <= 0:
                break
            looked_up = lease.unsettled()[: wanted + 64]
            found = self._messages_at(state, looked_up, now)
            if found.expired:
                plan.missing[lease.lease_id] = found.expired
            messages = [found.messages[o] for o in looked_up if o in found.messages][:wanted]
            plan.redeliveries.append((lease, messages))
            wanted -= len(messages)
        if not allow_new or wanted <= 0 or state.cursor >= end or _flow_bound(state):
            return plan  # nothing new, or flow control: this queue waits for acks
        page = self._index.read_from(
            state.topic,
            state.queue,
            state.cursor_base,
            min(100, max(wanted, 8)),
            now_s=now // 1000,
            end=end,
        )
        cursor = state.cursor
        if page.floor > cursor:  # retention removed what lay between: skip it for good
            plan.skip_to = cursor = page.floor
        plan.entries, plan.scan_end = page.entries, cursor
        room = limits.MAX_INFLIGHT_PER_QUEUE - (cursor - state.committed)
        for entry in page.entries:
            if entry.base_offset >= end:
                break  # appended after the head was read (or not visible yet: retries)
            batch = self._reader.messages(entry)
            if not batch:  # the object is past retention already: skip its offsets
                plan.scan_end = entry.next_offset
                continue
            for message in batch[max(0, cursor - entry.base_offset) :]:
                if wanted <= 0 or len(plan.new) >= min(MAX_SCAN_PER_QUEUE, room):
                    return plan
                passes = tag_filter.matches(message.tag)
                plan.new.append((message, passes))
                plan.scan_end = message.offset + 1
                wanted -= passes
        return plan

    def _take(
        self,
        state: GroupQueueState,
        plan: QueuePlan,
        share: int,
        tag_filter: TagFilter,
        now: int,
        invisible_ms: int,
        end: int,
        orderly_for: tuple[str | None, Membership, int] | None = None,
    ) -> list[ReceivedMessage]:
        """Lease ``share`` messages of the plan and store the state (re-planning on a race).

        A state that only moved (skipped expired or filtered messages) or whose bounds were
        made exact from its leases is stored too, so that is not redone on the next poll.
        ``orderly_for`` (FIFO topics: client id, the group's members, the topic's queue
        count): the delivery takes or renews the client's lock in the same write.
        """
        for attempt in range(SAVE_ATTEMPTS):
            # a lease runs its whole invisible time from when it is stored: the pass's clock
            # reading may be old by now (expiry moves, batch reads, a lost save)
            now = max(now, self._clock())
            delivered = self._apply(state, plan, share, now, invisible_ms)
            if orderly_for is not None and orderly_for[0] is not None and delivered:
                orderly.take_lock(state, orderly_for[0], now, invisible_ms)
            state.refresh()
            if not delivered and not state.changed():
                return []  # nothing to hand out and nothing to record
            if self._states.save(state, self._redelivery_traces(state, plan)):
                return [self._received(state, message, lease) for message, lease in delivered]
            time.sleep(random.uniform(0, 0.01 * (attempt + 1)))  # another consumer won: back off
            state = self._states.load_one(state.group, state.topic, state.queue)
            if orderly_for is not None:
                client_id, members, queues = orderly_for
                if not orderly.may_serve(state, client_id, members, queues, self._clock()).allowed:
                    return []  # another consumer took the queue meanwhile
            plan = self._plan(
                state, tag_filter, share, self._clock(), end, fifo=orderly_for is not None
            )
        raise Busy(f"group {state.group!r} is contended on queue {state.queue}; retry")

    def _redelivery_traces(self, state: GroupQueueState, plan: QueuePlan) -> list[dict]:
        """Items recording the lease ids this pass redelivered in place (with what they
        held unsettled): their handles stay stale after the redelivery settles."""
        if self._retries is None:
            return []
        superseded = {
            lease.lease_id: lease.unsettled()
            for lease, _ in plan.redeliveries
            if lease.lease_id not in state.leases
        }
        return self._retries.redelivery_traces(state.group, state.topic, state.queue, superseded)

    @staticmethod
    def _apply(
        state: GroupQueueState, plan: QueuePlan, share: int, now: int, invisible_ms: int
    ) -> list[tuple[StoredMessage, Lease]]:
        delivered: list[tuple[StoredMessage, Lease]] = []
        for lease_id, offsets in plan.missing.items():
            state.settle(lease_id, offsets)
        state.skip_to(plan.skip_to)
        for lease, messages in plan.redeliveries:
            room = share - len(delivered)
            if room <= 0:
                break
            if messages:
                taken = state.redeliver(
                    lease.lease_id, min(len(messages), room), now=now, invisible_ms=invisible_ms
                )
                delivered.extend((m, taken) for m in messages[:room])
        room = share - len(delivered)
        wanted = [m for m, passes in plan.new if passes]
        taken_new, untaken = wanted[:room], wanted[room:]
        end = untaken[0].offset if untaken else plan.scan_end
        if end > state.cursor:
            lease = state.lease_new(
                end,
                delivered=[m.offset for m in taken_new],
                cursor_base=plan.base_for(end),
                now=now,
                invisible_ms=invisible_ms,
            )
            if lease is not None:
                delivered.extend((m, lease) for m in taken_new)
        return delivered

    def _received(
        self, state: GroupQueueState, message: StoredMessage, lease: Lease
    ) -> ReceivedMessage:
        handle = ReceiptHandle(
            state.group,
            state.topic,
            state.queue,
            message.offset,
            lease.lease_id,
            lease.attempt,
            lease.deadline,
        )
        return ReceivedMessage(message, self._signer.encode(handle), lease.attempt, lease.deadline)

    def _messages_at(self, state: GroupQueueState, offsets: list[int], now: int) -> Found:
        """The stored messages at ``offsets``, and which others are past retention."""
        return self._lookup.messages_at(state.topic, state.queue, offsets, now_s=now // 1000)

    # ================================================================ ack
    def ack(
        self,
        group: str,
        receipt_handles: list[str],
        may_consume: Callable[[str], bool] | None = None,
        before_slow_path: Callable[[], None] | None = None,
    ) -> list[AckOutcome]:
        """Ack every valid handle; one outcome per handle, in order.

        ``may_consume(topic)`` (the caller's permission) is asked per handle: a handle for a
        topic it refuses is ``invalid`` (AccessDenied) and acks nothing. ``before_slow_path``
        runs before anything but a whole-lease delete (the API claims the request's nonce
        there: a replayed ack costs one failed write, then is refused).

        Acking a message acked before succeeds; a stale or invalid handle does not stop
        the others. Fast path, per lease the handles name: one conditional delete when they
        name every message it delivered, else one conditional ``ADD`` (and a delete of a
        lease left settled); only when a condition fails are the queue's summary and the
        leases around the offsets read to sort the handles out.
        """
        check_group_name(group)
        if not 1 <= len(receipt_handles) <= limits.MAX_ACK_HANDLES:
            raise InvalidRequest(f"ack takes 1-{limits.MAX_ACK_HANDLES} receipt handles")
        outcomes: dict[int, AckOutcome] = {}
        by_lease: dict[tuple[str, int, str], dict[int, ReceiptHandle]] = {}
        for position, text in enumerate(receipt_handles):
            try:
                handle = self._decode(group, text)
            except (InvalidReceiptHandle, ForeignReceiptHandle) as exc:
                outcomes[position] = AckOutcome(text, AckStatus.INVALID, exc)
                continue
            if may_consume is not None and not may_consume(handle.topic):
                denied = AccessDenied(_denied(group, handle.topic))
                outcomes[position] = AckOutcome(text, AckStatus.INVALID, denied)
                continue
            key = (handle.topic, handle.queue, handle.lease_id)
            by_lease.setdefault(key, {})[position] = handle
        if len({(topic, queue) for topic, queue, _ in by_lease}) > MAX_ACK_QUEUES:
            raise InvalidRequest(f"one ack spans at most {MAX_ACK_QUEUES} queues")
        states: dict[tuple[str, int], GroupQueueState] = {}
        for (topic, queue, lease_id), pending in by_lease.items():
            for _ in range(SAVE_ATTEMPTS):
                offsets = sorted({h.offset for h in pending.values()})
                done = self._states.ack(
                    group, topic, queue, lease_id, offsets, before_add=before_slow_path
                )
                if done is not None:
                    stale = done.stale | self._moved_on_alone(group, topic, queue, done)
                    for position, handle in pending.items():
                        if handle.offset in stale:
                            outcomes[position] = _moved_on(receipt_handles[position])
                    break
                if before_slow_path is not None:
                    before_slow_path()
                pending = self._sort_out(group, pending, receipt_handles, outcomes, states)
                if not pending:
                    break
                states.pop((topic, queue), None)  # it raced a change: read again
            else:
                raise Busy("the group state is contended; retry the ack")
            with self._lock:  # an ack may end a FIFO queue's delivery in flight
                self._fifo_busy.pop((group, topic, queue), None)
            for position in pending:
                outcomes.setdefault(
                    position, AckOutcome(receipt_handles[position], AckStatus.ACKED)
                )
        return [outcomes[p] for p in range(len(receipt_handles))]

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

    def _decode(self, group: str, text: str) -> ReceiptHandle:
        handle = self._signer.decode(text)
        if handle.group != group:
            raise ForeignReceiptHandle("the receipt handle belongs to another consumer group")
        return handle

    def _sort_out(
        self,
        group: str,
        pending: dict[int, ReceiptHandle],
        texts: list[str],
        outcomes: dict[int, AckOutcome],
        states: dict[tuple[str, int], GroupQueueState],
    ) -> dict[int, ReceiptHandle]:
        """After a failed ack of one lease's handles: settle already-acked and stale
        handles; the rest stay.

        An offset below the committed bound, or that no open lease holds, was settled; one
        that a lease under another id holds was redelivered since (the handle is stale).
        The leases around the offsets are read in two queries, and which messages the
        lease's expiry moved on in one pass (records, originals and each moved batch read
        once), however many handles there are.
        """
        handles = list(pending.values())
        topic, queue, lease_id = handles[0].topic, handles[0].queue, handles[0].lease_id
        if (topic, queue) not in states:
            states[(topic, queue)] = self._states.load_one(group, topic, queue)
        state = states[(topic, queue)]
        settled_below = min(state.committed, state.cursor) if state.version else 0
        looked_up = [h.offset for h in handles if settled_below <= h.offset < state.cursor]
        covering = (
            self._states.leases_covering_each(group, topic, queue, looked_up)
            if state.version and looked_up
            else {}
        )
        moved: set[int] | None = None

        def moved_on(offset: int) -> bool:
            """Retries: the lease expired and this message was moved on, not acked."""
            nonlocal moved
            if self._retries is None:
                return False
            if moved is None:  # the lease's moves, read once for all its handles
                offsets = [h.offset for h in handles]
                moved = self._retries.moved_offsets(group, topic, queue, lease_id, offsets)
            return offset in moved

        still: dict[int, ReceiptHandle] = {}
        for position, handle in pending.items():
            if state.version and handle.offset < settled_below:
                outcomes[position] = (
                    _moved_on(texts[position])
                    if moved_on(handle.offset)
                    else AckOutcome(texts[position], AckStatus.ACKED)
                )
                continue
            around = covering.get(handle.offset)
            if around is not None and any(x.lease_id == handle.lease_id for x in around):
                still[position] = handle  # its lease is live: the ack raced a change
            elif around is not None and not any(x.holds(handle.offset) for x in around):
                outcomes[position] = (
                    _moved_on(texts[position])
                    if moved_on(handle.offset)
                    else AckOutcome(texts[position], AckStatus.ACKED)
                )
            else:
                outcomes[position] = AckOutcome(
                    texts[position],
                    AckStatus.EXPIRED,
                    ReceiptHandleExpired(
                        "the receipt handle is stale: the message was redelivered since"
                    ),
                )
        return still

    # ================================================================ invisible
    def change_invisible(
        self,
        group: str,
        receipt_handle: str,
        invisible_seconds: int,
        may_consume: Callable[[str], bool] | None = None,
    ) -> ReceivedMessage:
        """Set one message's invisible time to now + ``invisible_seconds``; a new handle.
        AccessDenied if ``may_consume(topic)`` refuses the handle's topic."""
        check_group_name(group)
        handle = self._decode(group, receipt_handle)
        if may_consume is not None and not may_consume(handle.topic):
            raise AccessDenied(_denied(group, handle.topic))
        # FIFO topics: the whole lease moves (its messages stay in order), and 0 s is allowed
        # (redeliver at once, to the lock owner only: a failing orderly listener's retry)
        fifo = self._handle_topic(handle.topic).message_type is MessageType.FIFO
        if not (fifo and 0 <= invisible_seconds <= limits.MAX_INVISIBLE_SECONDS):
            _check_invisible(invisible_seconds)
        for _ in range(SAVE_ATTEMPTS):
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
            deadline = self._clock() + invisible_seconds * 1000
            lease = state.change_invisible(
                handle.lease_id, handle.offset, deadline=deadline, whole=fifo
            )
            if lease is None:
                raise ReceiptHandleExpired(
                    "the receipt handle is stale: the message was acked or redelivered since"
                )
            if self._states.save(state):
                found = self._messages_at(state, [handle.offset], self._clock())
                message = found.messages.get(handle.offset)
                if message is None:
                    raise MessageNotFound("the message is past its retention")
                received = self._received(state, message, lease)
                if self._retries is not None and is_internal(handle.topic):
                    return self._retries.present(received)  # retries: shown as the original
                return received
        raise Busy("the group state is contended; retry")

    def _handle_topic(self, name: str) -> Topic:
        """The topic a receipt handle names: internal ones (``retry.<g>.<t>``) included."""
        if self._retries is not None and is_internal(name):  # retries: internal topics
            return self._retries.resolve_topic(name)
        return self._topics.active(name)

    # ================================================================ describe
    def describe_group(self, group: str, topic: str | None = None) -> GroupDescription:
        """Per queue the group consumed: committed offset, cursor, max offset, in flight,
        the oldest unacked offset with its delivery attempt; and the subscriptions."""
        check_group_name(group)
        if topic is not None:
            check_topic_name(topic)
        states, subscriptions = self._states.list_group(group)
        states = [s for s in states if topic is None or s.topic == topic]
        heads: dict[str, dict[int, QueueHead]] = {}
        for name in {s.topic for s in states}:
            heads[name] = self._heads.get_many(name, [s.queue for s in states if s.topic == name])
        statuses = []
        for state in states:
            oldest = state.oldest_unsettled()
            statuses.append(
                GroupQueueStatus(
                    topic=state.topic,
                    queue=state.queue,
                    committed_offset=state.settled_offset(),
                    cursor=state.cursor,
                    max_offset=heads[state.topic][state.queue].next_offset,
                    inflight=state.inflight(),
                    oldest_unacked_offset=oldest[0] if oldest else None,
                    oldest_unacked_attempt=oldest[1] if oldest else None,
                )
            )
        if topic is not None:
            subscriptions = {t: f for t, f in subscriptions.items() if t == topic}
        return GroupDescription(sorted(statuses, key=lambda s: (s.topic, s.queue)), subscriptions)


@dataclass(frozen=True)
class GroupDescription:
    queues: list[GroupQueueStatus]
    subscriptions: dict[str, str]
    """Topic → the group's filter on it."""


def _has_work(view: GroupView, queue: int, now: int) -> bool:
    """Whether the group has unread messages or expired leases on ``queue``."""
    state, head = view.states[queue], view.heads[queue]
    if head.closed:  # the topic is being deleted (or this is a stale read of its old head)
        return False
    return head.next_offset > state.cursor or state.may_have_expired(now)


def _flow_bound(state: GroupQueueState) -> bool:
    """Whether flow control holds new messages back (exact once the leases are loaded)."""
    return (
        state.cursor - state.committed >= limits.MAX_INFLIGHT_PER_QUEUE
        or state.open_leases >= limits.MAX_LEASES_PER_QUEUE
    )


def _moved_on(text: str) -> AckOutcome:
    """Retries: the handle's lease expired and its message went to the retry topic."""
    return AckOutcome(
        text,
        AckStatus.EXPIRED,
        ReceiptHandleExpired("the receipt handle is stale: the message will be delivered again"),
    )


def _denied(group: str, topic: str) -> str:
    return f"access denied: this access key may not consume topic {topic} as group {group}"


def _check_invisible(seconds: int) -> None:
    if not limits.MIN_INVISIBLE_SECONDS <= seconds <= limits.MAX_INVISIBLE_SECONDS:
        raise InvalidDuration(
            f"invisible_seconds must be {limits.MIN_INVISIBLE_SECONDS}-"
            f"{limits.MAX_INVISIBLE_SECONDS}"
        )


def _fitting(messages: list[StoredMessage], bytes_left: int, *, first: bool) -> tuple[int, int]:
    """How many of ``messages`` fit in the response (the first one always does)."""
    count = used = 0
    for message in messages:
        size = wire_size(message)
        if used + size > bytes_left and not (first and count == 0):
            break
        count, used = count + 1, used + size
    return count, used


def _check_client_owner(
    members: Membership | None, client_id: str | None, access_key: str | None, now: int
) -> None:
    """ClientIdInUse when ``client_id`` is a live registration of another access key."""
    member = members.members.get(client_id) if members and client_id else None
    if member is not None and member.owned_by_another(access_key, now):
        raise ClientIdInUse(
            f"client id {client_id!r} of group {members.group!r} is registered by another "
            "access key; use another client id"
        )
