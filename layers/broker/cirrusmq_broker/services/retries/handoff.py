"""Handoff: received messages move on to other topics (a move task sending dead letters back
to their sources, or to another topic).

Each message is appended to the topic its route names, as a message of that topic (same id,
body, tag, keys, group and born time; the route property dropped; no origin, no attempts),
through the one move append path. Fence: per lease and destination queue one append that
carries, in its own transaction, the settle of what it moves in the lease (conditional on
the lease as read, as lease expiry and nack do) and the caller's own items (a move task's
progress, conditional on the task's version and status). So the append, the settle and the
caller's record commit together or not at all: a crash before leaves the messages leased
(they come back when the lease ends), a crash after has settled them (an ack of their
handles is stale), and a re-run never appends a message twice. A lease changed in between
(a delete through SQS, another mover) makes the append store nothing; the lease is read
again and only what it still holds is moved.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from ...errors import TopicNotFound
from ...model import MessageType, NewMessage, ProducerStamp, StoredMessage, SystemFields, Topic
from ...storage.appends import ExtraItemRejected
from ...storage.groups import GroupStateStore
from .. import optimistic
from ..moves import MoveAppender
from ..offset_lookup import OffsetLookup
from ..receipt_handles import ReceiptHandles
from .retry_topic import RetryTopic

Fence = Callable[[int], list[dict]]
"""The caller's transaction items for an append moving that many messages."""


@dataclass
class HandoffResult:
    moved: int = 0
    """Messages appended to their destination and settled by this call."""
    left: int = 0
    """Messages left in their leases: no route, their destination is gone, or the
    caller's fence refused (they come back when their lease ends)."""
    refused: bool = False
    """The caller's fence refused an append (e.g. the task was cancelled)."""


class Handoff:
    def __init__(
        self,
        *,
        retry_topic: RetryTopic,
        moves: MoveAppender,
        lookup: OffsetLookup,
        states: GroupStateStore,
        handles: ReceiptHandles,
        clock: Callable[[], int],
    ) -> None:
        self._retry_topic = retry_topic
        self._moves = moves
        self._lookup = lookup
        self._states = states
        self._handles = handles
        self._clock = clock

    def move(
        self,
        group: str,
        receipt_handles: list[str],
        route: Callable[[StoredMessage], str | None],
        *,
        producer: str,
        drop_property: str | None = None,
        fence: Fence,
        committed: Callable[[int], None],
    ) -> HandoffResult:
        """Move the messages ``receipt_handles`` (delivered to ``group``) to the topics
        ``route`` names (None: leave it); ``fence(n)`` gives the caller's items for an
        append of n messages, ``committed(n)`` is told once it committed."""
        result = HandoffResult()
        invalid, by_lease = self._handles.by_lease(group, receipt_handles)
        result.left += len(invalid)
        for (topic_name, queue, lease_id), handles in by_lease.items():
            if result.refused:
                result.left += len(handles)
                continue
            try:
                topic = self._retry_topic.resolve(topic_name)
            except TopicNotFound:
                result.left += len(handles)
                continue
            offsets = sorted({h.offset for h in handles.values()})
            self._move_lease(
                group, topic, queue, lease_id, offsets, route, producer, drop_property,
                fence, committed, result,
            )  # fmt: skip
        return result

    def _move_lease(
        self,
        group: str,
        topic: Topic,
        queue: int,
        lease_id: str,
        offsets: list[int],
        route: Callable[[StoredMessage], str | None],
        producer: str,
        drop_property: str | None,
        fence: Fence,
        committed: Callable[[int], None],
        result: HandoffResult,
    ) -> None:
        done: set[int] = set()

        def attempt(_: int) -> bool | optimistic.Conflict:
            state = self._states.load_one(group, topic.name, queue)
            lease = self._states.load_lease(state, lease_id) if state.version else None
            held = [o for o in offsets if lease is not None and lease.holds(o)]
            if lease is None or not held:
                return True
            found = self._lookup.messages_at(topic.name, queue, held, now_s=self._clock() // 1000)
            batches = self._batches(list(found.messages.values()), route)
            current = lease
            for position, ((destination, q), messages) in enumerate(
                sorted(batches.items(), key=lambda kv: (kv[0][0].name, kv[0][1]))
            ):
                moved = [m.offset for m in messages]
                after = current.moved_on(moved)  # settled as moved, in this append's transaction
                stamp = ProducerStamp(f"{producer}.{lease_id}.v{lease.version}", position)
                digest = hashlib.sha256(
                    f"{stamp.producer_id}#{destination.name}#{q}#{moved}".encode()
                ).hexdigest()
                copies = [_copy(m, drop_property) for m in messages]
                items = [*self._states.settle_requests(state, current, after), *fence(len(copies))]
                try:
                    recorded = self._moves.append(
                        destination, q, copies, stamp, digest, fence=items
                    )
                except ExtraItemRejected:
                    return optimistic.CONFLICT
                except TopicNotFound:
                    continue
                if recorded is not None:
                    return optimistic.CONFLICT  # another attempt of this very move: read again
                committed(len(copies))
                done.update(moved)
                current = after
            return True

        if not optimistic.update(attempt, exhausted=lambda: False):
            result.refused = True
        result.moved += len(done)
        result.left += len(offsets) - len(done)

    def _batches(
        self, messages: list[StoredMessage], route: Callable[[StoredMessage], str | None]
    ) -> dict[tuple[Topic, int], list[StoredMessage]]:
        """The messages by (destination topic, queue): a FIFO destination takes a message
        group's messages in the queue a producer's send would choose; others the message's
        own queue number (modulo)."""
        batches: dict[tuple[Topic, int], list[StoredMessage]] = {}
        for message in sorted(messages, key=lambda m: m.offset):
            name = route(message)
            destination = self._moves.existing(name) if name else None
            if destination is None:
                continue
            if destination.message_type is MessageType.FIFO and message.message_group:
                q = zlib.crc32(message.message_group.encode()) % destination.queues
            else:
                q = message.queue % destination.queues
            batches.setdefault((destination, q), []).append(message)
        return batches


def _copy(message: StoredMessage, drop_property: str | None) -> NewMessage:
    new = message.as_new(SystemFields(transaction_id=message.system.transaction_id))
    properties = {k: v for k, v in new.properties.items() if k != drop_property}
    return replace(new, properties=properties)
