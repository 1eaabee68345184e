"""The broker's domain model: frozen dataclasses, no behaviour beyond small derivations."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class MessageType(enum.StrEnum):
    """What a topic carries (RocketMQ 5 topic message types)."""

    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"


class TopicStatus(enum.StrEnum):
    ACTIVE = "ACTIVE"
    DELETING = "DELETING"


@dataclass(frozen=True)
class Topic:
    """A named set of queues."""

    name: str
    queues: int
    """Number of queues (each an append-only log)."""
    message_type: MessageType
    retention_hours: int
    """Messages are kept this long after they are stored."""
    created_timestamp: int
    """Milliseconds since the epoch."""
    status: TopicStatus = TopicStatus.ACTIVE
    deleted_timestamp: int | None = None
    """When the topic was deleted (its data is purged a while later)."""


@dataclass(frozen=True)
class NewMessage:
    """A message as a producer hands it in, validated."""

    message_id: str
    body: bytes
    tag: str | None = None
    keys: tuple[str, ...] = ()
    properties: dict[str, str] = field(default_factory=dict)
    message_group: str | None = None
    """Sharding key: messages of one group go to one queue, in order."""
    born_timestamp: int = 0
    """When the producer made it (ms); the broker's clock when the producer did not say."""


@dataclass(frozen=True)
class StoredMessage:
    """A message as it is stored in a batch object, with its place in the log."""

    topic: str
    queue: int
    offset: int
    message_id: str
    body: bytes
    tag: str | None
    keys: tuple[str, ...]
    properties: dict[str, str]
    message_group: str | None
    born_timestamp: int
    stored_timestamp: int


@dataclass(frozen=True)
class SendReceipt:
    """Where one sent message was stored."""

    message_id: str
    queue: int
    offset: int


@dataclass(frozen=True)
class ProducerStamp:
    """The idempotency key a producer sends with a batch."""

    producer_id: str
    sequence: int


@dataclass(frozen=True)
class IndexEntry:
    """One log index item: a batch object holding offsets [base_offset, base_offset+count)."""

    topic: str
    queue: int
    base_offset: int
    count: int
    object_key: str
    size_bytes: int
    min_timestamp: int
    """Earliest born timestamp of the batch's messages (ms)."""
    max_timestamp: int
    """Latest born timestamp of the batch's messages (ms)."""
    stored_timestamp: int = 0
    """When the broker stored the batch (ms)."""

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


@dataclass(frozen=True)
class QueueOffsets:
    """The retained offset range of one queue: [min_offset, max_offset)."""

    queue: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True)
class ReceivedMessage:
    """A message handed to a consumer group under a lease."""

    message: StoredMessage
    receipt_handle: str
    delivery_attempt: int
    invisible_until: int


@dataclass(frozen=True)
class GroupQueueStatus:
    """How far a group has consumed one queue."""

    topic: str
    queue: int
    committed_offset: int
    cursor: int
    max_offset: int
    inflight: int
    oldest_unacked_offset: int | None = None
    """The lowest delivered offset not yet acked: what holds ``committed_offset`` back."""
    oldest_unacked_attempt: int | None = None
    """Its delivery attempt."""

    @property
    def lag(self) -> int:
        return max(0, self.max_offset - self.committed_offset)


def stream_id(topic: str, queue: int) -> str:
    """The key of one queue's log: ``<topic>#<queue>``."""
    return f"{topic}#{queue}"
