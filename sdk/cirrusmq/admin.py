""":class:`Admin`: topics, consumer groups and access keys, with typed results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

from . import dead_letters as _dlq
from .consumer import group_path
from .credentials import Credentials
from .membership import ConsumerInfo
from .message import FilterExpression, MessageView
from .offsets_admin import OffsetReset, QueueOffsetInfo, ResetTarget, reset_offsets, topic_offsets
from .transport import RetryPolicy, Transport
from .wire import malformed, read_bool, read_int, read_list, read_mapping, read_str, read_str_list

__all__ = [
    "AccessKey",
    "AccessKeySecret",
    "Admin",
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

    @classmethod
    def from_wire(cls, data: Any) -> Topic:
        """A topic from its JSON form (``TransportError`` if malformed)."""
        return cls(
            read_str(data, "name"),
            read_int(data, "queues"),
            read_str(data, "message_type"),
            read_int(data, "retention_hours"),
            read_int(data, "created_timestamp"),
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


@dataclass(frozen=True)
class GroupDescription:
    group: str
    queues: tuple[GroupQueue, ...]
    max_delivery_attempts: int | None = None
    """Deliveries before a message goes to the group's dead-letter topic (issue 9)."""
    consumers: tuple[ConsumerInfo, ...] = ()
    """Live consumers (registered by heartbeats) and their queues, by client id."""

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
    """``*`` or ``TagA || TagB``."""


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


class Admin:
    """Manage topics and access keys, inspect consumer groups. Errors are the typed
    ``MQError`` subclasses (e.g. ``ConflictError`` with code ``TopicAlreadyExists``,
    ``NotFoundError``, ``AccessDeniedError`` for a key that is not admin)."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        request_timeout_s: float = 10.0,
        max_attempts: int = 3,
        transport: Transport | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self._own_transport = transport is None
        self._transport = transport or Transport(
            endpoint,
            credentials,
            request_timeout_s=request_timeout_s,
            retry=RetryPolicy(max_attempts=max_attempts),
        )

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection pool (idempotent)."""
        if self._own_transport:
            self._transport.close()

    def create_topic(
        self,
        name: str,
        queues: int = 8,
        message_type: str = "NORMAL",
        retention_hours: int = 72,
    ) -> Topic:
        """Create a topic (``ConflictError`` if it exists)."""
        body = self._transport.request(
            "POST",
            "/v1/topics",
            json_body={
                "name": name,
                "queues": queues,
                "message_type": message_type,
                "retention_hours": retention_hours,
            },
            idempotent=False,
        )
        return Topic.from_wire(body)

    def list_topics(self) -> list[Topic]:
        """Every topic, sorted by name."""
        body = self._transport.request("GET", "/v1/topics")
        return [Topic.from_wire(t) for t in read_list(body, "topics")]

    def describe_topic(self, name: str) -> TopicDescription:
        """A topic with its per-queue offsets (``NotFoundError`` if there is none)."""
        body = self._transport.request("GET", _topic_path(name))
        offsets = tuple(
            QueueOffsets(read_int(q, "queue"), read_int(q, "min_offset"), read_int(q, "max_offset"))
            for q in read_list(body, "queue_offsets")
        )
        return TopicDescription(Topic.from_wire(body), offsets)

    def delete_topic(self, name: str) -> None:
        """Delete a topic at once (its data is purged in the background)."""
        self._transport.request("DELETE", _topic_path(name))

    def describe_group(self, group: str, topic: str | None = None) -> GroupDescription:
        """Offsets, lag and in-flight counts of ``group`` per queue it consumed."""
        body = self._transport.request(
            "GET", group_path(group), params={"topic": topic} if topic else None
        )
        return GroupDescription(
            read_str(body, "group"),
            tuple(
                GroupQueue(
                    read_str(q, "topic"),
                    *(read_int(q, f) for f in _GROUP_QUEUE_INTS),
                )
                for q in read_list(body, "queues")
            ),
            body.get("max_delivery_attempts") if isinstance(body, dict) else None,
            tuple(ConsumerInfo.from_wire(c) for c in read_list(body, "consumers", optional=True)),
        )

    def subscribe(
        self, group: str, topic: str, filter_expression: FilterExpression | str = "*"
    ) -> Subscription:
        """Set the filter ``group`` consumes ``topic`` with.

        A group has one filter per topic (recorded by its first receive); a receive with
        another filter is refused with :class:`~cirrusmq.errors.SubscriptionConflictError`
        until the subscription is changed here. Messages skipped under the former filter stay
        skipped.
        """
        expression = (
            filter_expression.expression
            if isinstance(filter_expression, FilterExpression)
            else FilterExpression(filter_expression).expression
        )
        body = self._transport.request(
            "PUT",
            f"{group_path(group, 'subscriptions')}/{quote(topic, safe='')}",
            json_body={"filter": expression},
        )
        return Subscription(
            read_str(body, "group"), read_str(body, "topic"), read_str(body, "filter")
        )

    def get_message(self, topic: str, message_id: str) -> MessageView:
        """A stored message by id (without a receipt handle)."""
        body = self._transport.request(
            "GET", f"{_topic_path(topic)}/messages/{quote(message_id, safe='')}"
        )
        return MessageView.from_wire(body)

    def health(self) -> dict[str, Any]:
        """The service's ``{"status", "version"}``."""
        return dict(read_mapping(self._transport.request("GET", "/v1/health")))

    # ------------------------------------------------------------------ offsets, rewind
    def topic_offsets(
        self, topic: str, *, timestamp: int | datetime | None = None
    ) -> list[QueueOffsetInfo]:
        """Per queue: min and max offset, and with ``timestamp`` (ms or datetime) the lowest
        offset stored at or after it (found from the index, exact per message)."""
        return topic_offsets(self._transport, topic, timestamp=timestamp)

    def reset_offsets(self, group: str, topic: str, to: ResetTarget) -> OffsetReset:
        """Move ``group``'s position on ``topic`` (RocketMQ's "回溯消费"): ``to`` is
        ``"earliest"``, ``"latest"``, a timestamp (ms since the epoch, or a datetime), or
        ``{queue: offset}``. Open leases are dropped (their receipt handles go stale); a
        target past retention starts at the earliest retained offset (``truncated``)."""
        return reset_offsets(self._transport, group, topic, to)

    # ------------------------------------------------------------------ access keys
    # ---------------------------------------------------------------- retries (issue 9)
    def update_group(self, group: str, *, max_delivery_attempts: int) -> int:
        """Set how often a message of ``group`` is delivered (1-1000, default 16: RocketMQ's
        maxReconsumeTimes 15 + the first delivery) before it becomes a dead letter."""
        return _dlq.update_group(self._transport.request, group_path(group), max_delivery_attempts)

    def list_dead_letters(
        self, group: str, topic: str | None = None, *, limit: int = 100, start: int = 0
    ) -> _dlq.DeadLetterPage:
        """The group's dead letters from DLQ offset ``start`` (optionally of one topic)."""
        return _dlq.list_dead_letters(
            self._transport.request, group_path(group), topic, limit, start
        )

    def redrive_dead_letters(
        self,
        group: str,
        topic: str | None = None,
        *,
        message_ids: list[str] | None = None,
        max_messages: int | None = None,
        rate: float | None = None,
    ) -> _dlq.RedriveSummary:
        """Send dead letters back to their original topics (same message id, attempts start
        again), at most ``rate`` per second. Resumable and idempotent: run it again after a
        failure; nothing is redriven twice."""
        return _dlq.redrive_dead_letters(
            self._transport.request,
            group_path(group),
            topic=topic,
            message_ids=message_ids,
            max_messages=max_messages,
            rate=rate,
        )

    def purge_dead_letters(self, group: str, *, before: int | None = None) -> int:
        """Drop the group's dead letters (below DLQ offset ``before``); returns the floor."""
        return _dlq.purge_dead_letters(self._transport.request, group_path(group), before)

    # ---------------------------------------------------------------- end of retries

    def create_access_key(self, permissions: Permissions, description: str = "") -> AccessKeySecret:
        """Create an access key; the result holds its secret — the only time it is shown.

        Not retried unless the request surely did not reach the service (a retry could make a
        second key)."""
        body = self._transport.request(
            "POST",
            "/v1/keys",
            json_body={"permissions": permissions.to_wire(), "description": description},
            idempotent=False,
        )
        return AccessKeySecret.from_wire(body)

    def list_access_keys(self) -> list[AccessKey]:
        """Every access key (without secrets)."""
        body = self._transport.request("GET", "/v1/keys")
        return [AccessKey.from_wire(k) for k in read_list(body, "keys")]

    def disable_access_key(self, access_key: str) -> AccessKey:
        """Disable a key: its requests are refused (``InvalidSignature``) within 60 s.
        A key cannot disable itself (``ConflictError``, code ``KeyInUse``)."""
        body = self._transport.request("POST", f"{_key_path(access_key)}/disable")
        return AccessKey.from_wire(body)

    def enable_access_key(self, access_key: str) -> AccessKey:
        """Enable a disabled key again."""
        body = self._transport.request("POST", f"{_key_path(access_key)}/enable")
        return AccessKey.from_wire(body)

    def delete_access_key(self, access_key: str) -> None:
        """Delete a key for good (``ConflictError`` ``KeyInUse`` for the caller's own key)."""
        self._transport.request("DELETE", _key_path(access_key))


_GROUP_QUEUE_INTS = ("queue", "committed_offset", "cursor", "max_offset", "lag", "inflight")


def _topic_path(name: str) -> str:
    return f"/v1/topics/{quote(name, safe='')}"


def _key_path(access_key: str) -> str:
    return f"/v1/keys/{quote(access_key, safe='')}"
