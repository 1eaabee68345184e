""":class:`Admin`: topics and consumer groups, with typed results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from .consumer import group_path
from .credentials import Credentials
from .message import FilterExpression, MessageView
from .transport import RetryPolicy, Transport

__all__ = [
    "Admin",
    "GroupDescription",
    "GroupQueue",
    "QueueOffsets",
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
    def from_wire(cls, data: Mapping[str, Any]) -> Topic:
        return cls(
            data["name"],
            data["queues"],
            data["message_type"],
            data["retention_hours"],
            data["created_timestamp"],
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


class Admin:
    """Manage topics and inspect consumer groups. Errors are the typed ``MQError`` subclasses
    (e.g. ``ConflictError`` with code ``TopicAlreadyExists``, ``NotFoundError``)."""

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
        return [Topic.from_wire(t) for t in body["topics"]]

    def describe_topic(self, name: str) -> TopicDescription:
        """A topic with its per-queue offsets (``NotFoundError`` if there is none)."""
        body = self._transport.request("GET", _topic_path(name))
        offsets = tuple(
            QueueOffsets(q["queue"], q["min_offset"], q["max_offset"])
            for q in body["queue_offsets"]
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
            body["group"],
            tuple(
                GroupQueue(
                    q["topic"],
                    q["queue"],
                    q["committed_offset"],
                    q["cursor"],
                    q["max_offset"],
                    q["lag"],
                    q["inflight"],
                )
                for q in body["queues"]
            ),
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
        return Subscription(body["group"], body["topic"], body["filter"])

    def get_message(self, topic: str, message_id: str) -> MessageView:
        """A stored message by id (without a receipt handle)."""
        body = self._transport.request(
            "GET", f"{_topic_path(topic)}/messages/{quote(message_id, safe='')}"
        )
        return MessageView.from_wire(body)

    def health(self) -> dict[str, Any]:
        """The service's ``{"status", "version"}``."""
        return self._transport.request("GET", "/v1/health")


def _topic_path(name: str) -> str:
    return f"/v1/topics/{quote(name, safe='')}"
