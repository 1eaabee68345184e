"""Checks every message of a send (plain or transactional) and makes the stored form."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from .. import limits
from ..errors import (
    DelayNotAllowed,
    InvalidDelay,
    InvalidMessage,
    MessageGroupRequired,
    MessageTooLarge,
    TooManyMessages,
)
from ..model import NO_SYSTEM_FIELDS, MessageInput, MessageType, NewMessage, SystemFields, Topic
from ..rules.delays import MAX_DELAY_MS
from ..validation import (
    check_keys,
    check_message_group,
    check_message_id,
    check_properties,
    check_tag,
    check_timestamp,
)
from .large_bodies import RESERVED_PROPERTIES


def validate_messages(
    topic: Topic,
    inputs: Sequence[MessageInput],
    now: int,
    make_id: Callable[[int], str],
    system: SystemFields = NO_SYSTEM_FIELDS,
) -> list[NewMessage]:
    """The messages of one send, validated; ``make_id(position)`` names those sent without
    an id (the same on every retry of a stamped send). Raises a 4xx broker error."""
    if not 1 <= len(inputs) <= limits.MAX_MESSAGES_PER_SEND:
        raise TooManyMessages(
            f"a send carries 1-{limits.MAX_MESSAGES_PER_SEND} messages, got {len(inputs)}"
        )
    messages, seen = [], set()
    for position, raw in enumerate(inputs):
        if not raw.body:
            raise InvalidMessage(f"message {position}: the body is empty")
        if len(raw.body) > limits.MAX_BODY_BYTES:
            raise MessageTooLarge(
                f"message {position}: body of {len(raw.body)} bytes is over "
                f"{limits.MAX_BODY_BYTES} bytes"
            )
        if raw.large_body is None and RESERVED_PROPERTIES.intersection(raw.properties):
            raise InvalidMessage(
                f"message {position}: properties {sorted(RESERVED_PROPERTIES)} are set by "
                "the service on a message with a large body"
            )
        message_id = (
            check_message_id(raw.message_id) if raw.message_id is not None else make_id(position)
        )
        if message_id in seen:
            raise InvalidMessage(f"message {position}: duplicate message id {message_id!r}")
        seen.add(message_id)
        group = check_message_group(raw.message_group) if raw.message_group is not None else None
        if topic.message_type is MessageType.FIFO and group is None:
            raise MessageGroupRequired(
                f"message {position}: topic {topic.name!r} is FIFO; set message_group"
            )
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
                system=_held_until(topic, raw, now, system, position),
            )
        )
    return messages


def _held_until(
    topic: Topic, raw: MessageInput, now: int, system: SystemFields, position: int
) -> SystemFields:
    """``system`` with the message's not-before time (FIFO topics only; a past one is none)."""
    if raw.not_before is None:
        return system
    if topic.message_type is not MessageType.FIFO:
        raise DelayNotAllowed(
            f"message {position}: not_before holds a message of a FIFO topic in its group; "
            f"topic {topic.name!r} is {topic.message_type.value}"
        )
    if raw.not_before - now > MAX_DELAY_MS:
        raise InvalidDelay(f"message {position}: not_before is more than 365 days ahead")
    if raw.not_before <= now:
        return system
    return replace(system, delivery_timestamp=raw.not_before)
