"""Consume: receive under a lease, ack, change invisible duration, look up by id, describe.

Receive takes the topic's queues in turn: each call starts at the next queue and moves on
to the following ones until ``max_messages`` (or the response byte budget) is reached, so
every queue is served first once every N calls and none starves behind a busy one. Per
queue it delivers expired leases first, then new messages from the cursor, and writes the
queue's state with one conditional put. Filling from as few queues as possible keeps the
writes per receive (and the acks that follow) near one, which is what a receive costs.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import limits
from ..errors import (
    Busy,
    ForeignReceiptHandle,
    InvalidDuration,
    InvalidRequest,
    MessageNotFound,
    ReceiptHandleExpired,
    TooManyInflight,
)
from ..filters import TagFilter
from ..group_state import GroupQueueState, Lease
from ..model import GroupQueueStatus, IndexEntry, ReceivedMessage, StoredMessage, Topic
from ..receipts import ReceiptHandle, ReceiptSigner
from ..storage.group_states import AckRequest, GroupStateStore
from ..storage.log_index import LogIndex
from ..storage.message_ids import MessageIdIndex
from ..validation import check_group_name, check_message_id
from .batch_reader import BatchReader
from .topic_catalog import TopicCatalog

RESPONSE_BYTE_BUDGET = limits.MAX_REQUEST_BYTES - 256 * 1024
"""What the messages of one receive response may take, base64 bodies included."""
MESSAGE_OVERHEAD_BYTES = 768
"""JSON around one message: ids, handle, tag, keys, properties (estimated)."""
MAX_SCAN_PER_QUEUE = 2000
"""Messages one receive examines per queue (bounds work when a filter skips most)."""
POLL_INTERVAL_SECONDS = 0.5
SAVE_ATTEMPTS = 6
MAX_ACK_QUEUES = 100
"""An ack touching several queues is one DynamoDB transaction (at most 100 items)."""


def wire_size(message: StoredMessage) -> int:
    body = 4 * ((len(message.body) + 2) // 3)
    extra = sum(len(k) + len(v) for k, v in message.properties.items()) + sum(
        map(len, message.keys)
    )
    return body + extra + MESSAGE_OVERHEAD_BYTES


@dataclass
class QueuePlan:
    """What one queue could deliver now."""

    redeliveries: list[tuple[Lease, list[StoredMessage]]] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    """Leased offsets past retention: they settle without a delivery."""
    new: list[tuple[StoredMessage, bool]] = field(default_factory=list)
    """Messages from the cursor on, with whether they pass the filter."""
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


class ConsumeService:
    def __init__(
        self,
        *,
        topics: TopicCatalog,
        index: LogIndex,
        reader: BatchReader,
        states: GroupStateStore,
        message_ids: MessageIdIndex,
        signer: ReceiptSigner,
        clock: Callable[[], int],
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._topics = topics
        self._index = index
        self._reader = reader
        self._states = states
        self._message_ids = message_ids
        self._signer = signer
        self._clock = clock
        self._sleep = sleep
        self._starts: dict[str, itertools.count[int]] = {}
        self._lock = threading.Lock()

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
    ) -> list[ReceivedMessage]:
        """Deliver up to ``max_messages``, waiting up to ``wait_seconds`` for the first."""
        check_group_name(group)
        tag_filter = TagFilter.parse(filter_expression)
        if not 1 <= max_messages <= limits.MAX_RECEIVE_MESSAGES:
            raise InvalidRequest(f"max_messages must be 1-{limits.MAX_RECEIVE_MESSAGES}")
        _check_invisible(invisible_seconds)
        if not 0 <= wait_seconds <= limits.MAX_WAIT_SECONDS:
            raise InvalidDuration(f"wait_seconds must be 0-{limits.MAX_WAIT_SECONDS}")
        topic = self._topics.active(topic_name)
        give_up = time.monotonic() + wait_seconds
        while True:
            received = self._receive_once(group, topic, tag_filter, max_messages, invisible_seconds)
            remaining = give_up - time.monotonic()
            if received or remaining <= 0:
                return received
            self._sleep(min(POLL_INTERVAL_SECONDS, remaining))

    def _receive_once(
        self, group: str, topic: Topic, tag_filter: TagFilter, budget: int, invisible_s: int
    ) -> list[ReceivedMessage]:
        queues = self._rotation(topic)
        states = self._states.load(group, topic.name, queues)
        received: list[ReceivedMessage] = []
        bytes_left = RESPONSE_BYTE_BUDGET
        for q in queues:
            wanted = budget - len(received)
            if wanted <= 0 or bytes_left <= 0:
                break
            now = self._clock()
            plan = self._plan(states[q], tag_filter, wanted, now)
            count, used = _fitting(plan.deliverable(), bytes_left, first=not received)
            try:
                taken = self._take(states[q], plan, count, tag_filter, now, invisible_s * 1000)
            except Busy:
                continue  # other consumers of the group hold this queue: serve the others
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

    def _plan(
        self, state: GroupQueueState, tag_filter: TagFilter, budget: int, now: int
    ) -> QueuePlan:
        plan = QueuePlan(scan_end=state.cursor)
        wanted = budget
        for lease in state.expired_leases(now):
            if wanted <= 0:
                break
            looked_up = lease.unsettled(state.acked)[: wanted + 64]
            found = self._messages_at(state, looked_up)
            horizon = max(found) if found else looked_up[-1]
            plan.missing += [o for o in looked_up if o not in found and o <= horizon]
            messages = [found[o] for o in looked_up if o in found][:wanted]
            plan.redeliveries.append((lease, messages))
            wanted -= len(messages)
        if (
            wanted <= 0
            or state.cursor - state.committed >= limits.MAX_INFLIGHT_PER_QUEUE
            or len(state.leases) >= limits.MAX_LEASES_PER_QUEUE
        ):
            return plan  # flow control: this queue waits for acks
        entries = self._index.read_from(
            state.topic, state.queue, state.cursor_base, min(100, max(wanted, 8)), now_s=now // 1000
        )
        if entries and entries[0].base_offset > state.cursor:
            state.skip_to(entries[0].base_offset)  # retention removed what lay between
        plan.entries, plan.scan_end = entries, state.cursor
        room = limits.MAX_INFLIGHT_PER_QUEUE - (state.cursor - state.committed)
        for entry in entries:
            batch = self._reader.messages(entry)
            if not batch:  # the object is past retention already: skip its offsets
                plan.scan_end = entry.next_offset
                continue
            for message in batch[max(0, state.cursor - entry.base_offset) :]:
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
    ) -> list[ReceivedMessage]:
        """Lease ``share`` messages of the plan and store the state (re-planning on a race)."""
        for attempt in range(SAVE_ATTEMPTS):
            cursor_before = state.cursor
            delivered = self._apply(state, plan, share, now, invisible_ms)
            if not delivered and state.cursor == cursor_before:
                return []  # nothing to hand out and nothing to record
            state.compact()
            if self._states.save(state):
                return [self._received(state, message, lease) for message, lease in delivered]
            time.sleep(random.uniform(0, 0.01 * (attempt + 1)))  # another consumer won: back off
            state = self._states.load_one(state.group, state.topic, state.queue)
            plan = self._plan(state, tag_filter, share, self._clock())
        raise Busy(f"group {state.group!r} is contended on queue {state.queue}; retry")

    @staticmethod
    def _apply(
        state: GroupQueueState, plan: QueuePlan, share: int, now: int, invisible_ms: int
    ) -> list[tuple[StoredMessage, Lease]]:
        delivered: list[tuple[StoredMessage, Lease]] = []
        state.acked.update(plan.missing)
        for lease, messages in plan.redeliveries:
            room = share - len(delivered)
            if room <= 0:
                break
            if messages:
                taken = state.redeliver(
                    lease, min(len(messages), room), now=now, invisible_ms=invisible_ms
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

    def _messages_at(self, state: GroupQueueState, offsets: list[int]) -> dict[int, StoredMessage]:
        """The stored messages at ``offsets`` (ascending), one index read per batch."""
        found: dict[int, StoredMessage] = {}
        pending = list(offsets)
        while pending:
            entry = self._index.entry_at(state.topic, state.queue, pending[0])
            if entry is None:
                pending.pop(0)
                continue
            batch = self._reader.messages(entry)
            for offset in pending:
                if offset >= entry.next_offset:
                    break
                if offset - entry.base_offset < len(batch):
                    found[offset] = batch[offset - entry.base_offset]
            pending = [o for o in pending if o >= entry.next_offset]
        return found

    # ================================================================ ack
    def ack(self, group: str, receipt_handles: list[str]) -> int:
        """Ack all handles or none; returns how many were acked."""
        check_group_name(group)
        if not 1 <= len(receipt_handles) <= limits.MAX_ACK_HANDLES:
            raise InvalidRequest(f"ack takes 1-{limits.MAX_ACK_HANDLES} receipt handles")
        handles = self._decode_all(group, receipt_handles)
        requests: dict[tuple[str, int], AckRequest] = {}
        for handle in handles:
            request = requests.setdefault(
                (handle.topic, handle.queue), AckRequest(handle.topic, handle.queue, {})
            )
            request.offsets_by_lease.setdefault(handle.lease_id, []).append(handle.offset)
        if len(requests) > MAX_ACK_QUEUES:
            raise InvalidRequest(f"one ack spans at most {MAX_ACK_QUEUES} queues")
        for _ in range(SAVE_ATTEMPTS):
            if self._states.ack(group, list(requests.values())):
                return len(handles)
            stale = self._stale(group, handles, receipt_handles)
            if stale:
                raise ReceiptHandleExpired(
                    f"{len(stale)} receipt handle(s) are stale: the message was redelivered "
                    "since; nothing was acked",
                    details={"receipt_handles": stale},
                )
        raise Busy("the group state is contended; retry the ack")

    def _decode_all(self, group: str, texts: list[str]) -> list[ReceiptHandle]:
        handles = [self._signer.decode(text) for text in texts]
        foreign = [t for t, h in zip(texts, handles, strict=True) if h.group != group]
        if foreign:
            raise ForeignReceiptHandle(
                f"{len(foreign)} receipt handle(s) belong to another consumer group",
                details={"receipt_handles": foreign},
            )
        return handles

    def _stale(self, group: str, handles: list[ReceiptHandle], texts: list[str]) -> list[str]:
        states: dict[tuple[str, int], GroupQueueState] = {}
        stale = []
        for handle, text in zip(handles, texts, strict=True):
            key = (handle.topic, handle.queue)
            if key not in states:
                states[key] = self._states.load_one(group, handle.topic, handle.queue)
            if not states[key].holds(handle.lease_id, handle.offset):
                stale.append(text)
        return stale

    # ================================================================ invisible
    def change_invisible(
        self, group: str, receipt_handle: str, invisible_seconds: int
    ) -> ReceivedMessage:
        """Set one message's invisible time to now + ``invisible_seconds``; a new handle."""
        check_group_name(group)
        _check_invisible(invisible_seconds)
        handle = self._decode_all(group, [receipt_handle])[0]
        for _ in range(SAVE_ATTEMPTS):
            state = self._states.load_one(group, handle.topic, handle.queue)
            if len(state.leases) >= 2 * limits.MAX_LEASES_PER_QUEUE:
                raise TooManyInflight("too many messages in flight on this queue; ack some first")
            deadline = self._clock() + invisible_seconds * 1000
            lease = state.change_invisible(handle.lease_id, handle.offset, deadline=deadline)
            if lease is None:
                raise ReceiptHandleExpired(
                    "the receipt handle is stale: the message was acked or redelivered since"
                )
            if self._states.save(state):
                message = self._messages_at(state, [handle.offset]).get(handle.offset)
                if message is None:
                    raise MessageNotFound("the message is past its retention")
                return self._received(state, message, lease)
        raise Busy("the group state is contended; retry")

    # ================================================================ lookup / describe
    def lookup(self, topic_name: str, message_id: str) -> StoredMessage:
        """The stored message with ``message_id`` in ``topic_name``."""
        topic = self._topics.active(topic_name)
        check_message_id(message_id)
        location = self._message_ids.get(topic.name, message_id)
        if location is not None:
            entry = self._index.entry_at(topic.name, location.queue, location.offset)
            batch = self._reader.messages(entry) if entry else []
            position = location.offset - entry.base_offset if entry else -1
            if 0 <= position < len(batch) and batch[position].message_id == message_id:
                return batch[position]
        raise MessageNotFound(f"no message {message_id!r} in topic {topic.name!r}")

    def describe_group(self, group: str, topic: str | None = None) -> list[GroupQueueStatus]:
        """Per queue the group consumed: committed offset, cursor, max offset, in flight."""
        check_group_name(group)
        statuses = []
        for state in self._states.list_group(group):
            if topic is not None and state.topic != topic:
                continue
            last = self._index.last_entry(state.topic, state.queue)
            statuses.append(
                GroupQueueStatus(
                    topic=state.topic,
                    queue=state.queue,
                    committed_offset=state.settled_offset(),
                    cursor=state.cursor,
                    max_offset=last.next_offset if last else 0,
                    inflight=state.inflight(),
                )
            )
        return sorted(statuses, key=lambda s: (s.topic, s.queue))


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
