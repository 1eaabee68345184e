"""What :class:`~cirrusmq.Admin` returns: topics, groups, subscriptions, permissions, keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..consumer.membership import ConsumerInfo
from ..credentials import Credentials
from ..message import FilterExpression
from ..wire import malformed, read_bool, read_int, read_list, read_mapping, read_str, read_str_list

__all__ = [
    "AccessKey",
    "AccessKeySecret",
    "GroupDescription",
    "GroupQueue",
    "Permissions",
    "QueueOffsets",
    "SubscribeGrant",
    "Subscription",
    "Topic",
    "TopicDescription",
]


@dataclass(frozen=True)
class Topic:
    """A topic: ``queues`` append-only logs."""

    name: str
    queues: int
    message_type: str
    """``NORMAL``, ``FIFO``, ``DELAY`` or ``TRANSACTION``."""
    retention_hours: int
    created_timestamp: int
    """ms since the epoch."""
    trace: bool = False
    """Whether requests touching its messages record message trace events."""

    @classmethod
    def from_wire(cls, data: Any) -> Topic:
        """A topic from its JSON form (``TransportError`` if malformed)."""
        return cls(
            read_str(data, "name"),
            read_int(data, "queues"),
            read_str(data, "message_type"),
            read_int(data, "retention_hours"),
            read_int(data, "created_timestamp"),
            data.get("trace") is True,
        )


@dataclass(frozen=True)
class TraceEvent:
    """One thing that happened to a message (``Admin.trace_message``).

    ``kind`` is one of ``sent``, ``scheduled``, ``released``, ``committed``,
    ``rolled_back``, ``delivered``, ``nacked``, ``expired``, ``moved_to_retry``,
    ``dead_lettered``, ``redriven``, ``acked``; the other fields are set where they apply
    (None otherwise); times are ms since the epoch."""

    kind: str
    time: int
    topic: str
    message_id: str
    queue: int | None = None
    offset: int | None = None
    group: str | None = None
    client_id: str | None = None
    """The consumer's client id (``delivered``)."""
    producer_id: str | None = None
    attempt: int | None = None
    """Delivery attempt (1 for the first delivery)."""
    invisible_until: int | None = None
    delivery_timestamp: int | None = None
    """When a ``scheduled`` message is due."""
    target_topic: str | None = None
    """The retry or dead-letter topic a message moved to."""
    reason: str | None = None
    transaction_id: str | None = None
    lease_topic: str | None = None
    """The topic the lease was on (a retry topic for a redelivery)."""
    born_timestamp: int | None = None

    @classmethod
    def from_wire(cls, data: Any) -> TraceEvent:
        """An event from its JSON form (``TransportError`` if malformed)."""
        known = {f for f in cls.__dataclass_fields__}  # newer fields are ignored
        extra = {k: v for k, v in data.items() if k in known} if isinstance(data, dict) else {}
        return cls(
            **{
                **extra,
                "kind": read_str(data, "kind"),
                "time": read_int(data, "time"),
                "topic": read_str(data, "topic"),
                "message_id": read_str(data, "message_id"),
            }
        )


@dataclass(frozen=True)
class QueueOffsets:
    queue: int
    min_offset: int
    """The oldest retained offset."""
    max_offset: int
    """The next offset to be written (exclusive)."""


@dataclass(frozen=True)
class TopicDescription:
    """A topic with the offsets of each of its queues."""

    topic: Topic
    queue_offsets: tuple[QueueOffsets, ...]

    @property
    def message_count(self) -> int:
        """Messages retained over all queues."""
        return sum(q.max_offset - q.min_offset for q in self.queue_offsets)


@dataclass(frozen=True)
class GroupQueue:
    """Where a consumer group stands on one queue of one topic."""

    topic: str
    queue: int
    committed_offset: int
    """Every offset below it is settled (acked or filtered out)."""
    cursor: int
    """The next offset to hand out."""
    max_offset: int
    lag: int
    """``max_offset - committed_offset``."""
    inflight: int
    """Delivered, not acked yet."""
    oldest_unacked_offset: int | None = None
    """The delivered message that holds ``committed_offset`` back (None: nothing in
    flight)."""
    oldest_unacked_attempt: int | None = None
    """How often that message was delivered."""


@dataclass(frozen=True)
class GroupDescription:
    group: str
    queues: tuple[GroupQueue, ...]
    max_delivery_attempts: int | None = None
    """Deliveries before a message goes to the group's dead-letter topic."""
    consumers: tuple[ConsumerInfo, ...] = ()
    """Live consumers (registered by heartbeats) and their queues, by client id."""
    subscriptions: tuple[Subscription, ...] = ()
    """The filter the group records per topic, by topic."""

    @property
    def lag(self) -> int:
        """The total lag over all queues."""
        return sum(q.lag for q in self.queues)

    @property
    def inflight(self) -> int:
        return sum(q.inflight for q in self.queues)


@dataclass(frozen=True)
class Subscription:
    """The filter a consumer group has recorded for a topic."""

    group: str
    topic: str
    filter: str
    """``*`` or ``TagA || TagB``; with ``filter_type`` SQL92, a condition."""
    filter_type: str = "TAG"
    """``TAG`` or ``SQL92``."""

    @classmethod
    def from_wire(cls, body: Any, group: str | None = None) -> Subscription:
        """From a subscription body (``group`` when the body names none)."""
        return cls(
            group if group is not None else read_str(body, "group"),
            read_str(body, "topic"),
            read_str(body, "filter"),
            body.get("filter_type") or "TAG",
        )

    @property
    def filter_expression(self) -> FilterExpression:
        """The filter, as a receive would ask for it."""
        return FilterExpression(self.filter, self.filter_type)


@dataclass(frozen=True)
class SubscribeGrant:
    """Consume as any of ``groups`` from any of ``topics`` (patterns: a name, or a prefix
    ending in ``*``)."""

    groups: tuple[str, ...]
    topics: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", _patterns(self.groups))
        object.__setattr__(self, "topics", _patterns(self.topics))

    def to_wire(self) -> dict[str, Any]:
        return {"groups": list(self.groups), "topics": list(self.topics)}

    @classmethod
    def from_wire(cls, data: Any) -> SubscribeGrant:
        return cls(read_str_list(data, "groups"), read_str_list(data, "topics"))


@dataclass(frozen=True)
class Permissions:
    """What an access key may do (deny by default); see docs/sdk.md, *Access keys*.

    ``Permissions(admin=True)`` allows everything; ``publish`` lists topic patterns;
    ``subscribe`` lists :class:`SubscribeGrant`. A pattern is a name or a prefix ending in
    ``*`` (``"audit-*"``).
    """

    admin: bool = False
    publish: tuple[str, ...] = ()
    subscribe: tuple[SubscribeGrant, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "publish", _patterns(self.publish))
        object.__setattr__(self, "subscribe", tuple(self.subscribe))

    @property
    def empty(self) -> bool:
        """Whether they allow nothing at all."""
        return not (self.admin or self.publish or self.subscribe)

    def to_wire(self) -> dict[str, Any]:
        return {
            "admin": self.admin,
            "publish": list(self.publish),
            "subscribe": [g.to_wire() for g in self.subscribe],
        }

    @classmethod
    def from_wire(cls, data: Any) -> Permissions:
        """Permissions from their JSON form (``TransportError`` if malformed)."""
        return cls(
            read_bool(data, "admin", default=False),
            read_str_list(data, "publish"),
            tuple(SubscribeGrant.from_wire(g) for g in read_list(data, "subscribe", optional=True)),
        )

    def __str__(self) -> str:
        parts = ["admin"] if self.admin else []
        if self.publish:
            parts.append("publish " + ", ".join(self.publish))
        parts += [
            f"subscribe {'|'.join(g.groups)} -> {', '.join(g.topics)}" for g in self.subscribe
        ]
        return "; ".join(parts) or "nothing"


def _patterns(values: Any) -> tuple[str, ...]:
    if isinstance(values, str):
        raise TypeError("a list of patterns is expected, not a string")
    return tuple(values)


ACTIVE = "ACTIVE"
DISABLED = "DISABLED"


@dataclass(frozen=True)
class AccessKey:
    """An access key as listed (never with its secret)."""

    access_key: str
    """``CMQ`` + 17 upper-case base32 characters (the bootstrap key of a local stack may
    differ)."""
    description: str
    permissions: Permissions
    status: str
    """``ACTIVE`` or ``DISABLED``."""
    created_timestamp: int
    """ms since the epoch."""

    @property
    def active(self) -> bool:
        return self.status == ACTIVE

    @classmethod
    def from_wire(cls, data: Any) -> AccessKey:
        """A key from its JSON form (``TransportError`` if malformed)."""
        description = read_mapping(data).get("description")
        if description is not None and not isinstance(description, str):
            raise malformed("'description' is not a string")
        return cls(
            read_str(data, "access_key"),
            description or "",
            Permissions.from_wire(
                read_mapping(read_mapping(data).get("permissions"), "permissions")
            ),
            read_str(data, "status"),
            read_int(data, "created_timestamp"),
        )


@dataclass(frozen=True)
class AccessKeySecret(AccessKey):
    """A key just created, with its secret: the only time the service shows it."""

    secret_key: str = field(default="", repr=False)

    @property
    def credentials(self) -> Credentials:
        """The key and its secret, for a client."""
        return Credentials(self.access_key, self.secret_key)

    @classmethod
    def from_wire(cls, data: Any) -> AccessKeySecret:
        key = AccessKey.from_wire(data)
        return cls(
            **{f: getattr(key, f) for f in _KEY_FIELDS}, secret_key=read_str(data, "secret_key")
        )


_KEY_FIELDS = ("access_key", "description", "permissions", "status", "created_timestamp")
