"""The broker's domain model: frozen dataclasses, no behaviour beyond small derivations."""

from __future__ import annotations

import enum
from collections.abc import Sequence
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
    trace: bool = False
    """Whether requests touching its messages record message trace events."""


@dataclass(frozen=True)
class MessageInput:
    """One message of a send request, as decoded from the wire (not yet validated)."""

    body: bytes
    message_id: str | None = None
    tag: str | None = None
    keys: Sequence[str] = ()
    properties: dict[str, str] = field(default_factory=dict)
    message_group: str | None = None
    born_timestamp: int | None = None
    delay_level: int | None = None
    """RocketMQ delay level 1-18: due that long after the send."""
    delivery_timestamp: int | None = None
    """Due at this time (ms since the epoch), up to 365 days ahead."""
    large_body: LargeBody | None = None
    """A body uploaded as its own S3 object; ``body`` is then empty on the wire."""
    not_before: int | None = None
    """FIFO topics: stored at once, in its group's order, but not handed out before this
    time (ms since the epoch; SQS's FIFO queue delay); while it waits it holds its group."""


@dataclass(frozen=True)
class LargeBody:
    """A pointer to a large body: an object the producer uploaded through a grant."""

    key: str
    """The object's key in the message bucket (under the topic's prefix)."""
    size: int
    """Its size in bytes, checked against the object when the message is sent."""
    sha256: str
    """Lowercase hex SHA-256 of the body, checked by the consumer's SDK while it reads."""


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
    system: SystemFields = field(default_factory=lambda: NO_SYSTEM_FIELDS)
    """What the broker records about a message it moved (delay, retry, dead letter, ...)."""


@dataclass(frozen=True)
class SystemFields:
    """Broker-written columns of a batch (schema version 2); all empty for a plain send.

    A message the broker moves (a delayed message made visible, a retry, a dead letter, a
    committed transaction) keeps its message id and carries where it first was stored.
    """

    delivery_timestamp: int | None = None
    """When a delayed message was due (ms); on a FIFO topic, a message sent with a
    ``not_before`` time: not handed out before it."""
    origin_topic: str | None = None
    """For a retry or dead letter: the topic it was first stored in."""
    origin_queue: int | None = None
    origin_offset: int | None = None
    reconsume_count: int = 0
    """Deliveries that failed before this copy was stored (0 for a first delivery)."""
    dead_letter_reason: str | None = None
    transaction_id: str | None = None
    """For a message of a transaction: its id."""


NO_SYSTEM_FIELDS = SystemFields()


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
    system: SystemFields = NO_SYSTEM_FIELDS

    def as_new(self, system: SystemFields | None = None) -> NewMessage:
        """The message to store again (released, committed, moved): the same id, body,
        tag, keys, properties, group and born time; ``system`` replaces its system fields."""
        return NewMessage(
            message_id=self.message_id,
            body=self.body,
            tag=self.tag,
            keys=self.keys,
            properties=dict(self.properties),
            message_group=self.message_group,
            born_timestamp=self.born_timestamp,
            system=self.system if system is None else system,
        )


@dataclass(frozen=True)
class SendReceipt:
    """Where one sent message was stored (a delayed one: its queue and due time)."""

    message_id: str
    queue: int
    offset: int | None
    """None for a delayed message: it gets its offset when it is due."""
    delivery_timestamp: int | None = None
    """For a delayed message: when it becomes visible (ms); cancel it with this time."""

    @property
    def scheduled(self) -> bool:
        return self.offset is None


@dataclass(frozen=True)
class ProducerStamp:
    """The idempotency key a producer sends with a batch."""

    producer_id: str
    sequence: int
    scope: str = ""
    """The access key that sent it ("" for the broker's own stamps): idempotency records are
    per scope, so another key that learns a producer id cannot claim its sequences."""


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
    key_filter: bytes | None = None
    """Bloom filter of the batch's message keys (``rules.key_filter``); None: none kept,
    the batch may hold any key."""
    held_until: int | None = None
    """The latest not-before time (ms) of the batch's messages that was still ahead when
    the batch was stored (``MessageInput.not_before``); None: no message held."""

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
    overdue: int = 0
    """Of ``inflight``, messages whose invisible time ran out: the next receive hands them
    out again (or moves them on)."""

    @property
    def lag(self) -> int:
        return max(0, self.max_offset - self.committed_offset)


def stream_id(topic: str, queue: int) -> str:
    """The key of one queue's log: ``<topic>#<queue>``."""
    return f"{topic}#{queue}"
