"""Half sends' input: validation of the messages, their ids and the request fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from ..errors import DelayNotAllowed
from ..model import NewMessage, SystemFields, Topic
from .message_validation import validate_messages
from .produce import MessageInput


def validate_half_messages(
    topic: Topic, inputs: Sequence[MessageInput], now: int, transaction_id: str, part: int
) -> list[NewMessage]:
    for position, raw in enumerate(inputs):
        if raw.delay_level is not None or raw.delivery_timestamp is not None:
            raise DelayNotAllowed(  # RocketMQ has no delayed transactional messages either
                f"message {position}: a transactional message cannot be delayed"
            )
    return validate_messages(
        topic,
        inputs,
        now,
        lambda position: generated_id(transaction_id, part, position),
        SystemFields(transaction_id=transaction_id),
    )


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
