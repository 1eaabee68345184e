"""Half sends' input: validation of the messages, their ids and the request fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from .. import limits
from ..errors import (
    DelayNotAllowed,
    InvalidMessage,
    MessageGroupRequired,
    MessageTooLarge,
    TooManyMessages,
)
from ..model import MessageType, NewMessage, SystemFields, Topic
from ..validation import (
    check_keys,
    check_message_group,
    check_message_id,
    check_properties,
    check_tag,
    check_timestamp,
)
from .produce import MessageInput


def validate_half_messages(
    topic: Topic, inputs: Sequence[MessageInput], now: int, transaction_id: str, part: int
) -> list[NewMessage]:
    if not 1 <= len(inputs) <= limits.MAX_MESSAGES_PER_SEND:
        raise TooManyMessages(
            f"a send carries 1-{limits.MAX_MESSAGES_PER_SEND} messages, got {len(inputs)}"
        )
    messages, seen = [], set()
    system = SystemFields(transaction_id=transaction_id)
    for position, raw in enumerate(inputs):
        if raw.delay_level is not None or raw.delivery_timestamp is not None:
            raise DelayNotAllowed(  # RocketMQ has no delayed transactional messages either
                f"message {position}: a transactional message cannot be delayed"
            )
        if not raw.body:
            raise InvalidMessage(f"message {position}: the body is empty")
        if len(raw.body) > limits.MAX_BODY_BYTES:
            raise MessageTooLarge(
                f"message {position}: body of {len(raw.body)} bytes is over "
                f"{limits.MAX_BODY_BYTES} bytes"
            )
        message_id = (
            check_message_id(raw.message_id)
            if raw.message_id
            else generated_id(transaction_id, part, position)
        )
        if message_id in seen:
            raise InvalidMessage(f"message {position}: duplicate message id {message_id!r}")
        seen.add(message_id)
        group = check_message_group(raw.message_group) if raw.message_group else None
        if topic.message_type is MessageType.FIFO and group is None:  # pragma: no cover
            raise MessageGroupRequired(f"message {position}: set message_group")
        messages.append(
            NewMessage(
                message_id=message_id,
                body=raw.body,
                tag=check_tag(raw.tag) if raw.tag is not None else None,
                keys=check_keys(list(raw.keys)),
                properties=check_properties(raw.properties),
                message_group=group,
                born_timestamp=(
                    check_timestamp(raw.born_timestamp, f"message {position}: born_timestamp")
                    if raw.born_timestamp is not None
                    else now
                ),
                system=system,
            )
        )
    return messages


def generated_id(transaction_id: str, part: int, position: int) -> str:
    """The same on every retry of the send."""
    return "T" + hashlib.sha256(f"{transaction_id}#{part}#{position}".encode()).hexdigest()[:31]


def digest(topic: str, inputs: Sequence[MessageInput]) -> str:
    h = hashlib.sha256(topic.encode())
    for m in inputs:
        h.update(hashlib.sha256(m.body).digest())
        h.update(
            json.dumps(
                [
                    m.message_id,
                    m.tag,
                    list(m.keys),
                    sorted(m.properties.items()),
                    m.message_group,
                    m.born_timestamp,
                ],
                separators=(",", ":"),
            ).encode()
        )
    return h.hexdigest()
