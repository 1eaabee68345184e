"""Dead-letter queues: a queue named by other queues' RedrivePolicy serves their dead letters.

A source queue's group sends a message to its CirrusMQ dead-letter topic after
``maxReceiveCount`` deliveries (the group's max delivery attempts). A receive from the
dead-letter queue first forwards those dead letters into the dead-letter queue's own topic —
the same message id, body, tag, keys and properties, plus the property ``sqs.source`` (the
source queue) — under an idempotent-produce stamp, then marks them purged in the source's
dead-letter topic; so they are received, deleted and counted like any message of the queue.
``StartMessageMoveTask`` sends them back to their source queues.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import defaultdict

from cirrusmq_broker.errors import IdempotencyConflict, TopicNotFound
from cirrusmq_broker.model import MessageInput, ProducerStamp, StoredMessage

from . import naming, queue_attributes
from .context import Call
from .naming import QueueName

SOURCE_PROPERTY = "sqs.source"
FORWARD_BATCH = 100
MOVE_BATCH = 100
MAX_MOVE_ROUNDS = 50
"""StartMessageMoveTask moves synchronously, at most this many receives of MOVE_BATCH."""
STAMP_SCOPE = "sqs"


def forward(call: Call, queue: QueueName, attributes: dict[str, str]) -> None:
    """Move the dead letters of the queue's sources into the queue's topic."""
    for name in queue_attributes.sources(attributes):
        source = naming.queue_name(name)
        try:
            page = call.broker.dead_letters.list(source.group, limit=FORWARD_BATCH)
        except TopicNotFound:
            continue
        if not page.dead_letters:
            continue
        letters = [d for d in page.dead_letters if not d.redriven]
        if letters:
            key = hashlib.sha256(f"{source.group}>{queue.topic}".encode()).hexdigest()[:40]
            stamp = ProducerStamp(f"sqs-dlq.{key}", letters[0].offset, STAMP_SCOPE)
            inputs = [_copy(d.message, {SOURCE_PROPERTY: source.name}) for d in letters]
            # IdempotencyConflict: forwarded before (the page grew since); purged below
            with contextlib.suppress(IdempotencyConflict):
                call.broker.produce.send(queue.topic, inputs, stamp)
        call.broker.dead_letters.purge(source.group, before=page.dead_letters[-1].offset + 1)


def move_back(call: Call, queue: QueueName) -> int:
    """Send the dead-letter queue's messages back to their source queues; how many."""
    moved = 0
    sources = queue_attributes.sources(
        queue_attributes.effective(call.broker.sqs_queues.get(queue.group), fifo=queue.fifo)
    )
    forward(call, queue, {queue_attributes.SOURCES: " ".join(sources)})
    for _ in range(MAX_MOVE_ROUNDS):
        received = call.broker.consume.receive(
            queue.group, queue.topic, max_messages=MOVE_BATCH, invisible_seconds=60
        )
        if not received:
            break
        by_source: dict[str, list[StoredMessage]] = defaultdict(list)
        handles = []
        for r in received:
            source = r.message.properties.get(SOURCE_PROPERTY) or (
                sources[0] if len(sources) == 1 else None
            )
            if source in sources:
                by_source[source].append(r.message)
                handles.append(r.receipt_handle)
        for source, messages in by_source.items():
            topic = naming.queue_name(source).topic
            call.broker.produce.send(topic, [_copy(m, drop=SOURCE_PROPERTY) for m in messages])
            moved += len(messages)
        if handles:
            call.broker.consume.ack(queue.group, handles)
        if len(handles) < len(received):
            break  # the rest has no source to go back to
    return moved


def _copy(
    message: StoredMessage, extra: dict[str, str] | None = None, drop: str | None = None
) -> MessageInput:
    properties = {k: v for k, v in message.properties.items() if k != drop}
    return MessageInput(
        body=message.body,
        message_id=message.message_id,
        tag=message.tag,
        keys=tuple(message.keys),
        properties={**properties, **(extra or {})},
        message_group=message.message_group,
        born_timestamp=message.born_timestamp or None,
    )
