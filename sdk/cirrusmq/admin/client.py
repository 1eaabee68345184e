""":class:`Admin`: topics, consumer groups and access keys, with typed results."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..client_transport import client_transport
from ..consumer.membership import ConsumerInfo
from ..consumer.paths import group_path
from ..credentials import Credentials
from ..message import FilterExpression, MessageView
from ..transport import Transport
from ..wire import read_int, read_list, read_mapping, read_optional_int, read_str
from . import dead_letters as _dlq
from .groups import GroupMetrics, GroupSummary, group_metrics, list_groups
from .key_lookup import KeyPage, find_by_key, find_by_key_page
from .models import (
    AccessKey,
    AccessKeySecret,
    GroupDescription,
    GroupQueue,
    Permissions,
    QueueOffsets,
    Subscription,
    Topic,
    TopicDescription,
    TraceEvent,
)
from .offsets import OffsetReset, QueueOffsetInfo, ResetTarget, reset_offsets, topic_offsets

__all__ = ["Admin"]

_GROUP_QUEUE_INTS = ("queue", "committed_offset", "cursor", "max_offset", "lag", "inflight")


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
        self._transport, self._own_transport = client_transport(
            transport, endpoint, credentials, request_timeout_s, max_attempts
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
        *,
        trace: bool = False,
    ) -> Topic:
        """Create a topic (``ConflictError`` if it exists); ``trace`` records what happens
        to its messages (:meth:`trace_message`; one trace write per request)."""
        body = self._transport.request(
            "POST",
            "/v1/topics",
            json_body={
                "name": name,
                "queues": queues,
                "message_type": message_type,
                "retention_hours": retention_hours,
                "trace": trace,
            },
            idempotent=False,
        )
        return Topic.from_wire(body)

    def update_topic(self, name: str, *, trace: bool | None = None) -> Topic:
        """Change a topic: turn message trace on or off (None: leave it)."""
        body = self._transport.request("PATCH", _topic_path(name), json_body={"trace": trace})
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

    def list_groups(self) -> list[GroupSummary]:
        """The consumer groups this key may consume as (with state or a subscription), by
        name, each with the topics it may consume as it."""
        return list_groups(self._transport)

    def group_metrics(
        self, group: str, *, minutes: int = 60, topic: str | None = None
    ) -> GroupMetrics:
        """``group``'s lag, oldest unacked age and in flight per topic and its dead letters,
        one point per minute over the last ``minutes`` (1-360), as the service's
        GroupMetricsFunction emitted them (read back from CloudWatch)."""
        return group_metrics(self._transport, group, minutes=minutes, topic=topic)

    def describe_group(self, group: str, topic: str | None = None) -> GroupDescription:
        """Offsets, lag and in-flight counts of ``group`` per queue it consumed, and (without
        ``topic``) per queue of its retry topics holding messages it has not read yet."""
        body = self._transport.request(
            "GET", group_path(group), params={"topic": topic} if topic else None
        )
        return GroupDescription(
            read_str(body, "group"),
            tuple(
                GroupQueue(
                    read_str(q, "topic"),
                    *(read_int(q, f) for f in _GROUP_QUEUE_INTS),
                    read_optional_int(q, "oldest_unacked_offset"),
                    read_optional_int(q, "oldest_unacked_attempt"),
                )
                for q in read_list(body, "queues")
            ),
            read_optional_int(body, "max_delivery_attempts"),
            tuple(ConsumerInfo.from_wire(c) for c in read_list(body, "consumers", optional=True)),
            tuple(
                Subscription.from_wire(s, read_str(body, "group"))
                for s in read_list(body, "subscriptions", optional=True)
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
            filter_expression
            if isinstance(filter_expression, FilterExpression)
            else FilterExpression(filter_expression)
        )
        body = self._transport.request(
            "PUT",
            f"{group_path(group, 'subscriptions')}/{quote(topic, safe='')}",
            json_body=expression.wire,
        )
        return Subscription.from_wire(body)

    def trace_message(self, topic: str, message_id: str) -> list[TraceEvent]:
        """What happened to a message of a traced topic, in time order (``NotFoundError``
        if nothing was recorded). Needs the permission to look the message up."""
        body = self._transport.request(
            "GET", f"{_topic_path(topic)}/messages/{quote(message_id, safe='')}/trace"
        )
        return [TraceEvent.from_wire(e) for e in read_list(body, "events")]

    def get_message(self, topic: str, message_id: str) -> MessageView:
        """A stored message by id (without a receipt handle)."""
        body = self._transport.request(
            "GET", f"{_topic_path(topic)}/messages/{quote(message_id, safe='')}"
        )
        return MessageView.from_wire(body)

    def find_by_key(
        self,
        topic: str,
        key: str,
        *,
        begin: int | datetime | None = None,
        end: int | datetime | None = None,
        page_size: int = 20,
    ) -> Iterator[MessageView]:
        """The messages of ``topic`` whose keys include ``key``, newest first, stored in
        [``begin``, ``end``] (ms since the epoch or datetimes; default: the topic's
        retention up to now). Lazy: one request per page of up to ``page_size`` (1-100)
        as you iterate, until the whole window is searched; messages stored after the
        first page are not included. Needs the permission to read the topic."""
        return find_by_key(self._transport, topic, key, begin=begin, end=end, page_size=page_size)

    def find_by_key_page(
        self,
        topic: str,
        key: str,
        *,
        begin: int | datetime | None = None,
        end: int | datetime | None = None,
        page_size: int = 20,
        page_token: str | None = None,
    ) -> KeyPage:
        """One page of :meth:`find_by_key`; pass its ``next_page_token`` back (with the
        same topic and key) for the next one, e.g. from a web request to the next."""
        return find_by_key_page(
            self._transport,
            topic,
            key,
            begin=begin,
            end=end,
            page_size=page_size,
            page_token=page_token,
        )

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
    # ------------------------------------------------ group settings and dead letters
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
        """Send dead letters back to the group only, as RocketMQ resends them to their
        consumer group (same message id, attempts start again; other groups of the topic get
        nothing again), at most ``rate`` per second. Resumable and idempotent: run it again after a
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


def _topic_path(name: str) -> str:
    return f"/v1/topics/{quote(name, safe='')}"


def _key_path(access_key: str) -> str:
    return f"/v1/keys/{quote(access_key, safe='')}"
