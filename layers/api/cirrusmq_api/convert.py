"""Between the broker's model and the wire schemas (base64 bodies live here)."""

from __future__ import annotations

import base64
import binascii

from cirrusmq_broker.container import current_broker
from cirrusmq_broker.errors import InvalidMessage
from cirrusmq_broker.model import LargeBody, MessageInput, ReceivedMessage, StoredMessage, Topic
from cirrusmq_broker.services.delivery import AckOutcome
from cirrusmq_broker.services.large_bodies import stored_pointer

from .schemas import AckResultBody, MessageBody, MessageIn, ReceivedMessageBody, TopicBody


def decode_body(text: str, position: int) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidMessage(f"message {position}: body is not valid base64") from exc


def message_input(message: MessageIn, position: int) -> MessageInput:
    return MessageInput(
        body=decode_body(message.body, position),
        message_id=message.message_id,
        tag=message.tag,
        keys=tuple(message.keys),
        properties=message.properties,
        message_group=message.message_group,
        born_timestamp=message.born_timestamp,
        delay_level=message.delay_level,
        delivery_timestamp=message.delivery_timestamp,
        large_body=(
            LargeBody(message.large_body.key, message.large_body.size, message.large_body.sha256)
            if message.large_body is not None
            else None
        ),
    )


def topic_body(topic: Topic) -> dict:
    return TopicBody(
        name=topic.name,
        queues=topic.queues,
        message_type=topic.message_type.value,
        retention_hours=topic.retention_hours,
        created_timestamp=topic.created_timestamp,
        trace=topic.trace,
    ).model_dump()


def message_fields(message: StoredMessage) -> dict:
    return {
        "message_id": message.message_id,
        "topic": message.topic,
        "queue": message.queue,
        "offset": message.offset,
        "body": base64.b64encode(message.body).decode(),
        "tag": message.tag,
        "keys": list(message.keys),
        "properties": message.properties,
        "message_group": message.message_group,
        "born_timestamp": message.born_timestamp,
        "stored_timestamp": message.stored_timestamp,
        "large_body": large_body_fields(message),
    }


def large_body_fields(message: StoredMessage) -> dict | None:
    """A large message's pointer with a presigned GET of its body (None: inline body)."""
    pointer = stored_pointer(message.properties)
    if pointer is None:
        return None
    url = current_broker().large_bodies.download_url(message.properties)
    return {"key": pointer.key, "size": pointer.size, "sha256": pointer.sha256, "url": url}


def message_body(message: StoredMessage) -> MessageBody:
    return MessageBody(**message_fields(message))


def received_body(received: ReceivedMessage) -> ReceivedMessageBody:
    return ReceivedMessageBody(
        **message_fields(received.message),
        receipt_handle=received.receipt_handle,
        delivery_attempt=received.delivery_attempt,
        invisible_until=received.invisible_until,
    )


def ack_result_body(outcome: AckOutcome) -> AckResultBody:
    error = outcome.error
    return AckResultBody(
        receipt_handle=outcome.receipt_handle,
        status=outcome.status.value,
        code=error.code if error else None,
        message=error.message if error else None,
    )
