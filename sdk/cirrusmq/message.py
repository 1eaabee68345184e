"""Messages as the SDK's users see them, and their JSON wire form."""

from __future__ import annotations

import base64
import enum
import io
import math
import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, BinaryIO, ClassVar

from .large_body import (
    CHUNK_BYTES,
    SIZE_ATTRIBUTES,
    LargeBody,
    LargeBodyRef,
    extended_pointer,
    payload_size,
)
from .wire import (
    read_base64,
    read_int,
    read_list,
    read_optional_int,
    read_optional_str,
    read_str,
    read_str_list,
    read_str_map,
)

__all__ = [
    "ConsumeResult",
    "FilterExpression",
    "Message",
    "MessageView",
    "SendReceipt",
    "new_message_id",
    "parse_receive_response",
]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
TAG, SQL92 = "TAG", "SQL92"
_TAG_EXPRESSION = re.compile(r"^\s*[^\s|*]+(\s*\|\|\s*[^\s|*]+)*\s*$")


def new_message_id() -> str:
    """A ULID-like id: 26 Crockford base32 characters, sortable by creation millisecond."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        value, digit = divmod(value, 32)
        chars.append(_CROCKFORD[digit])
    return "".join(reversed(chars))


def _frozen_mapping(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class Message:
    """A message to send. ``body`` may be given as ``str`` (sent as UTF-8)."""

    topic: str
    """The topic to send to."""
    body: bytes
    """The payload, 1 byte to 2 GiB: up to 4 MiB it travels inline, above it (or when it
    is a path: a file whose contents are the body, read part by part) the producer uploads
    it as its own object first (docs/sdk.md, *Large messages*)."""
    tag: str | None = None
    """One tag consumers can filter on (``TagA || TagB``)."""
    keys: tuple[str, ...] = ()
    """Business keys (e.g. an order id)."""
    properties: Mapping[str, str] | None = None
    """User properties, string to string."""
    message_group: str | None = None
    """Sharding key: messages of one group go to one queue, in order. Required on FIFO topics."""
    delivery_timestamp: int | None = None
    """Deliver at this time (ms since the epoch), up to 365 days ahead; a past time is
    delivered at once. Not on FIFO or TRANSACTION topics; not with ``delay_level``."""
    delay_level: int | None = None
    """RocketMQ delay level 1-18 (1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h
    2h), counted from when the service stores the message."""
    large_body: LargeBodyRef | None = None
    """Set by the producer once it uploaded the body (``body`` is then empty)."""

    def __post_init__(self) -> None:
        if isinstance(self.body, os.PathLike):
            object.__setattr__(self, "body", Path(self.body))
        elif isinstance(self.body, str):
            object.__setattr__(self, "body", self.body.encode())
        elif not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))
        if isinstance(self.keys, str):
            object.__setattr__(self, "keys", (self.keys,))
        elif not isinstance(self.keys, tuple):
            object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "properties", _frozen_mapping(self.properties))

    def to_wire(self, message_id: str, born_timestamp: int) -> dict[str, Any]:
        """The JSON form of this message in a send request."""
        if isinstance(self.body, Path):
            raise ValueError("a message whose body is a file is uploaded before it is sent")
        wire: dict[str, Any] = {
            "message_id": message_id,
            "body": base64.b64encode(self.body).decode("ascii"),
            "born_timestamp": born_timestamp,
        }
        if self.large_body is not None:
            wire["large_body"] = self.large_body.to_wire()
        if self.tag is not None:
            wire["tag"] = self.tag
        if self.keys:
            wire["keys"] = list(self.keys)
        if self.properties:
            wire["properties"] = dict(self.properties)
        if self.message_group is not None:
            wire["message_group"] = self.message_group
        if self.delivery_timestamp is not None:
            wire["delivery_timestamp"] = self.delivery_timestamp
        if self.delay_level is not None:
            wire["delay_level"] = self.delay_level
        return wire


class _Body:
    """``MessageView.body``: the inline bytes, or a large body read (all of it, once) on
    first access."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._slot = f"_{name}_bytes"

    def __get__(self, view: MessageView | None, owner: type | None = None) -> bytes:
        if view is None:
            raise AttributeError("body")  # a required field: no default
        if view.large_body is not None and self._slot + "_loaded" not in view.__dict__:
            view.__dict__[self._slot] = view.large_body.read()
            view.__dict__[self._slot + "_loaded"] = True
        return view.__dict__[self._slot]

    def __set__(self, view: MessageView, value: bytes) -> None:
        view.__dict__[self._slot] = value


@dataclass(frozen=True)
class MessageView:
    """A received (or looked-up) message.

    A large message (``large_body`` set) reads its body from S3: ``body`` loads all of it
    on first access, :meth:`body_stream` streams it. Its ``properties`` carry the pointer
    (``ExtendedPayloadSize``, ``cirrusmq.body.*``).
    """

    message_id: str
    topic: str
    body: bytes = _Body()  # type: ignore[assignment]
    tag: str | None
    keys: tuple[str, ...]
    properties: Mapping[str, str]
    message_group: str | None
    queue: int
    """The queue of the topic it is stored in."""
    offset: int
    """Its offset in that queue."""
    born_timestamp: int
    """When the producer made it (ms since the epoch)."""
    stored_timestamp: int
    """When the service stored it (ms since the epoch)."""
    receipt_handle: str | None = None
    """What acks it; ``None`` for a looked-up message."""
    delivery_attempt: int = 0
    """1 on the first delivery to a group, then 2, 3, ..."""
    invisible_until: int | None = None
    """Until when (ms since the epoch) the group will not see it again unless it is acked."""
    large_body: LargeBody | None = None
    """The body object of a message whose body was too large to travel inline."""

    def __repr__(self) -> str:
        body = repr(self.large_body) if self.large_body is not None else repr(self.body)
        return f"MessageView(message_id={self.message_id!r}, topic={self.topic!r}, body={body})"

    @property
    def body_size(self) -> int:
        """The body's size in bytes (without reading a large body)."""
        return self.large_body.size if self.large_body is not None else len(self.body)

    def body_stream(self, *, chunk_bytes: int = CHUNK_BYTES) -> BinaryIO:
        """The body as a binary stream: a large body is read from S3 chunk by chunk (and
        checked against its size and SHA-256 at the end), an inline one from memory."""
        if self.large_body is not None:
            return self.large_body.open(chunk_bytes=chunk_bytes)  # type: ignore[return-value]
        return io.BytesIO(self.body)

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    @classmethod
    def from_wire(cls, data: Any) -> MessageView:
        """A message from its JSON form; :class:`~cirrusmq.errors.TransportError` if malformed."""
        return cls(
            message_id=read_str(data, "message_id"),
            topic=read_str(data, "topic"),
            body=read_base64(data, "body"),
            tag=read_optional_str(data, "tag"),
            keys=read_str_list(data, "keys"),
            properties=_frozen_mapping(read_str_map(data, "properties")),
            message_group=read_optional_str(data, "message_group"),
            queue=read_int(data, "queue"),
            offset=read_int(data, "offset"),
            born_timestamp=read_int(data, "born_timestamp"),
            stored_timestamp=read_int(data, "stored_timestamp"),
            receipt_handle=read_optional_str(data, "receipt_handle"),
            delivery_attempt=read_optional_int(data, "delivery_attempt", 0) or 0,
            invisible_until=read_optional_int(data, "invisible_until"),
            large_body=_large_body(data),
        )


"""The Extended Client's reserved attribute (and its legacy name): the payload's size."""


def _large_body(data: Any) -> LargeBody | None:
    """The ``large_body`` of a message's JSON form, or the payload an SQS Extended Client
    offloaded, if it has either."""
    if not isinstance(data, Mapping):
        return None
    if data.get("large_body") is None:
        return _extended_payload(data)
    pointer = data["large_body"]
    return LargeBody(
        key=read_str(pointer, "key"),
        size=read_int(pointer, "size"),
        sha256=read_optional_str(pointer, "sha256"),
        url=read_str(pointer, "url"),
    )


def _extended_payload(data: Mapping[str, Any]) -> LargeBody | None:
    """An SQS Extended Client's offloaded payload: a size attribute and a pointer body."""
    properties = data.get("properties")
    if not isinstance(properties, Mapping):
        return None
    size = payload_size(next((properties[a] for a in SIZE_ATTRIBUTES if a in properties), None))
    body = data.get("body")
    if size is None or not isinstance(body, str):
        return None
    try:
        raw = base64.b64decode(body, validate=True)
    except ValueError:
        return None
    found = extended_pointer(raw)
    if found is None:
        return None
    bucket, key = found
    return LargeBody(key=key, size=size, sha256=None, url=None, bucket=bucket)


def parse_receive_response(body: Any) -> list[MessageView]:
    """The messages of a receive response; :class:`~cirrusmq.errors.TransportError` if
    malformed."""
    return [MessageView.from_wire(m) for m in read_list(body, "messages")]


MIN_DUE_S = 1.0
"""The shortest wait a receive's ``next_due_ms`` asks for (the service floors it too)."""


def parse_receive_due(body: Any) -> float | None:
    """Seconds from now until something of the group the receive could not serve yet (a
    lease, a retry in its backoff) may become receivable, from a receive response's
    ``next_due_ms`` (at least :data:`MIN_DUE_S`); None when the service knows of nothing,
    or gives nothing readable (an older service leaves it out). A hint to look again then,
    not a promise."""
    due = body.get("next_due_ms") if isinstance(body, Mapping) else None
    if isinstance(due, bool) or not isinstance(due, int | float):
        return None
    try:
        seconds = due / 1000  # an integer no float holds raises
    except OverflowError:
        return None
    if not 0 <= seconds < math.inf:  # NaN, negative, Infinity: nothing readable
        return None
    return max(MIN_DUE_S, seconds)


@dataclass(frozen=True)
class SendReceipt:
    """Where a sent message was stored; ``pending`` when it waits in the outbox instead."""

    message_id: str
    """The client-made message id."""
    topic: str
    queue: int | None = None
    """The queue it was stored in; ``None`` while pending."""
    offset: int | None = None
    """Its offset in that queue; ``None`` while pending."""
    pending: bool = False
    """True when the service could not be reached: the message is in the durable outbox and
    will be sent (once, in order) when the service is back."""
    delivery_timestamp: int | None = None
    """A scheduled (delayed) message's due time (ms): it has no offset until then. Give
    it to ``Producer.cancel_scheduled`` to cancel the message before."""

    @property
    def scheduled(self) -> bool:
        """Stored as a delayed message, visible to consumers at ``delivery_timestamp``."""
        return self.delivery_timestamp is not None and self.offset is None


def scheduled_path(
    receipt_or_topic: SendReceipt | str, message_id: str | None, delivery_timestamp: int | None
) -> tuple[str, dict[str, str]]:
    """The cancel route of a scheduled message, from its receipt or its three fields."""
    from urllib.parse import quote

    if isinstance(receipt_or_topic, SendReceipt):
        topic = receipt_or_topic.topic
        message_id = receipt_or_topic.message_id
        delivery_timestamp = receipt_or_topic.delivery_timestamp
    else:
        topic = receipt_or_topic
    if message_id is None or delivery_timestamp is None:
        raise ValueError(
            "cancel_scheduled needs a receipt of a scheduled message, or "
            "topic, message_id and delivery_timestamp"
        )
    path = f"/v1/topics/{quote(topic, safe='')}/scheduled/{quote(message_id, safe='')}"
    return path, {"delivery_timestamp": str(delivery_timestamp)}


@dataclass(frozen=True)
class FilterExpression:
    """Which messages a subscription receives: by tag (``*`` for all, or ``TagA || TagB``),
    or by an SQL92 condition on their properties (:meth:`sql`), as RocketMQ's
    ``FilterExpression`` with its ``TAG`` and ``SQL92`` types.

    Both are applied by the service on what a receive reads anyway; the service checks an
    SQL92 condition (a malformed one is ``InvalidFilterExpression`` with its position)."""

    expression: str = "*"
    filter_type: str = TAG
    """``TAG`` or ``SQL92``."""
    ALL: ClassVar[FilterExpression]
    """Every tag (``*``)."""

    def __post_init__(self) -> None:
        if self.filter_type not in (TAG, SQL92):
            raise ValueError(f"unknown filter type {self.filter_type!r}: use TAG or SQL92")
        text = self.expression.strip()
        if self.filter_type == SQL92:
            if not text:
                raise ValueError('an SQL92 filter needs a condition, e.g. "a > 5"')
        elif text != "*" and not _TAG_EXPRESSION.match(text):
            raise ValueError(f"invalid filter expression {self.expression!r}: use '*' or 'A || B'")
        object.__setattr__(self, "expression", text)

    @classmethod
    def tags(cls, tags: Iterable[str]) -> FilterExpression:
        """A filter accepting any of ``tags``."""
        return cls(" || ".join(tags))

    @classmethod
    def sql(cls, condition: str) -> FilterExpression:
        """A filter accepting messages whose properties meet ``condition`` (RocketMQ's SQL92
        subset: ``> >= < <= = <> BETWEEN IN IS NULL AND OR NOT``, ``TAGS`` is the tag), e.g.
        ``FilterExpression.sql("a > 5 AND region IN ('eu', 'us')")``."""
        return cls(condition, SQL92)

    @property
    def wire(self) -> dict[str, str]:
        """The request fields naming this filter (``filter_type`` only for SQL92)."""
        if self.filter_type == TAG:
            return {"filter": self.expression}
        return {"filter": self.expression, "filter_type": self.filter_type}

    def __str__(self) -> str:
        return self.expression if self.filter_type == TAG else f"SQL92 {self.expression}"


FilterExpression.ALL = FilterExpression("*")


class ConsumeResult(enum.Enum):
    """What a push consumer's listener reports for a message."""

    SUCCESS = "success"
    """Processed: the message is acked."""
    FAILURE = "failure"
    """Not processed: the message is delivered again later (with ``delivery_attempt`` + 1)."""


def normalize_subscriptions(
    subscriptions: Mapping[str, FilterExpression | str] | Iterable[str] | None,
) -> dict[str, FilterExpression]:
    """``{topic: FilterExpression}`` from a mapping (values may be strings) or topic names."""
    if subscriptions is None:
        return {}
    if isinstance(subscriptions, str):
        subscriptions = [subscriptions]
    if isinstance(subscriptions, Mapping):
        items = subscriptions.items()
    else:
        items = ((topic, FilterExpression.ALL) for topic in subscriptions)
    return {
        topic: expr if isinstance(expr, FilterExpression) else FilterExpression(str(expr))
        for topic, expr in items
    }
