"""Between the protocol's messages and the broker's (pure).

System properties on publish: ``KEYS`` becomes the message's keys (split on spaces, as
RocketMQ joins several keys), ``__SHARDINGKEY`` its message group (one queue, in order on a
FIFO topic), ``__STARTDELIVERTIME`` (epoch ms) its delivery time; they and every other
property are also kept as properties, so a consumer reads them back as sent. On consume the
keys and the message group are written back as ``KEYS`` and ``__SHARDINGKEY``.
"""

from __future__ import annotations

import base64
import hashlib

from cirrusmq_broker.model import MessageInput, ReceivedMessage

from .errors import invalid_argument
from .wire import (
    PublishedMessage,
    consumed_message,
    format_properties,
    is_xml_text,
    whole_number,
)

KEYS = "KEYS"
SHARDING_KEY = "__SHARDINGKEY"
START_DELIVER_TIME = "__STARTDELIVERTIME"
TRANS_CHECK_IMMUNITY = "__TransCheckT"
BODY_ENCODING = "__CIRRUS_BODY_ENCODING"
"""Set to ``base64`` on a consumed message whose body is not XML-safe UTF-8 text (a binary
body sent through another protocol): the body is then its base64 text."""
SYSTEM = frozenset({KEYS, SHARDING_KEY})
"""Written back from the message's own fields, not from its properties."""


def body_md5(body: bytes) -> str:
    return hashlib.md5(body, usedforsecurity=False).hexdigest().upper()


def message_input(message: PublishedMessage) -> MessageInput:
    """The broker's message for a publish request (validated further by the broker)."""
    properties = dict(message.properties)
    keys = tuple(properties.pop(KEYS, "").split())
    group = properties.pop(SHARDING_KEY, None)
    delivery = properties.get(START_DELIVER_TIME)
    return MessageInput(
        body=message.body.encode("utf-8", "surrogatepass"),
        tag=message.tag,
        keys=keys,
        properties=properties,
        message_group=group,
        delivery_timestamp=_epoch_ms(delivery) if delivery is not None else None,
    )


def transaction_immunity_seconds(message: PublishedMessage) -> int | None:
    """``__TransCheckT`` (seconds) if the message is transactional."""
    value = message.properties.get(TRANS_CHECK_IMMUNITY)
    if value is None:
        return None
    seconds = whole_number(value, 9)
    if seconds is None:
        raise invalid_argument(f"{TRANS_CHECK_IMMUNITY} must be whole seconds, not {value[:32]!r}")
    return seconds


def _epoch_ms(value: str) -> int:
    ms = whole_number(value, 15)
    if ms is None:
        raise invalid_argument(
            f"{START_DELIVER_TIME} must be a time in ms since the epoch, not {value[:32]!r}"
        )
    return ms


def consumed(received: ReceivedMessage, invisible_seconds: int) -> str:
    """One ``<Message>`` of a consume answer."""
    message = received.message
    properties = {k: v for k, v in message.properties.items() if k not in SYSTEM}
    if message.keys:
        properties[KEYS] = " ".join(message.keys)
    if message.message_group:
        properties[SHARDING_KEY] = message.message_group
    text = _text_body(message.body)
    if text is None:
        text = base64.b64encode(message.body).decode("ascii")
        properties[BODY_ENCODING] = "base64"
    delivered_at = received.invisible_until - invisible_seconds * 1000
    return consumed_message(
        {
            "MessageId": message.message_id,
            "ReceiptHandle": received.receipt_handle,
            "MessageBodyMD5": body_md5(message.body),
            "MessageBody": text,
            "PublishTime": message.stored_timestamp,
            "FirstConsumeTime": delivered_at,
            "NextConsumeTime": received.invisible_until,
            "ConsumedTimes": received.delivery_attempt,
            "MessageTag": message.tag,
            "Properties": format_properties(properties),
        }
    )


def _text_body(body: bytes) -> str | None:
    """The body as text if it is non-empty UTF-8 that XML can carry."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text and is_xml_text(text) else None
