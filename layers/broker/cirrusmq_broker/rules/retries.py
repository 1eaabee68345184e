"""Pure rules of consumer retries and dead letters: names, backoff levels, attempt counting.

A message is delivered at most ``max_delivery_attempts`` times (default 16). After a failed
delivery number k (k = the message's ``reconsume_count`` + its lease's attempt) it is either
re-published to the group's retry topic ``retry.<group>.<topic>`` at backoff level k-1
(capped at the last level), or, once k reached the maximum, to the group's dead-letter topic
``dlq.<group>``; a group whose redelivery is immediate gets it back in place at once
instead of the retry topic. The retry topic has one queue per backoff level, so along one
queue the time a batch becomes visible (stored time + the level's delay) never decreases,
and one more queue, :data:`REDRIVE_QUEUE`, for the group's dead letters a redrive sends
back: visible as soon as stored, read by that group only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..model import NewMessage, StoredMessage, SystemFields

RETRY_PREFIX = "retry."
DLQ_PREFIX = "dlq."
BACKOFF_SECONDS: tuple[int, ...] = (
    10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
)  # fmt: skip
"""RocketMQ delay levels 3-18: one retry-topic queue per level."""
RETRY_QUEUES = len(BACKOFF_SECONDS)
"""Backoff levels (0-15): the retry topic's first queues."""
REDRIVE_QUEUE = RETRY_QUEUES
"""The retry topic's queue of the group's redriven dead letters (no backoff: due at once)."""
RETRY_TOPIC_QUEUES = RETRY_QUEUES + 1
DLQ_QUEUES = 1
DLQ_RETENTION_HOURS = 14 * 24
MIN_RETRY_RETENTION_HOURS = 24
"""A retry topic keeps its messages at least this long (the longest backoff is 2 h)."""
DEFAULT_MAX_DELIVERY_ATTEMPTS = 16
MIN_MAX_DELIVERY_ATTEMPTS, MAX_MAX_DELIVERY_ATTEMPTS = 1, 1000
MAX_NACK_DELAY_SECONDS = BACKOFF_SECONDS[-1]
DLQ_TARGET = RETRY_QUEUES
"""Target number of the dead-letter topic (levels are 0..15)."""
REDELIVERY_BACKOFF = "backoff"
"""A group's default redelivery: an expired lease's messages go to the retry topic and come
back after its backoff level (RocketMQ); invisible times from ``MIN_INVISIBLE_SECONDS``."""
REDELIVERY_IMMEDIATE = "immediate"
"""A group whose expired leases are redelivered in place, as soon as their deadline passed,
with the delivery attempt increased (SQS's visibility timeout; a FIFO topic always does so);
invisible times from 0 s (0: receivable again at once)."""
REDELIVERIES = (REDELIVERY_BACKOFF, REDELIVERY_IMMEDIATE)
REASON_EXPIRED = "max delivery attempts reached; last attempt: invisible time expired"
REASON_NACKED = "max delivery attempts reached; last attempt: negatively acknowledged"


def retry_topic(group: str, topic: str) -> str:
    return f"{RETRY_PREFIX}{group}.{topic}"


def dlq_topic(group: str) -> str:
    return f"{DLQ_PREFIX}{group}"


def is_internal(topic: str) -> bool:
    """Internal topics carry a ``.`` (user names cannot)."""
    return "." in topic


def retry_parts(topic: str) -> tuple[str, str] | None:
    """(group, user topic) of a retry topic's name, else None (a group name has no dot)."""
    if not topic.startswith(RETRY_PREFIX):
        return None
    group, dot, origin = topic[len(RETRY_PREFIX) :].partition(".")
    return (group, origin) if dot and group and origin else None


def retry_origin(group: str, topic: str) -> str | None:
    """The user topic ``topic`` is the retry topic of (for ``group``), else None."""
    prefix = f"{RETRY_PREFIX}{group}."
    return topic[len(prefix) :] if topic.startswith(prefix) else None


def level_for_delay(seconds: int) -> int:
    """The smallest level whose delay is at least ``seconds`` (never early)."""
    for level, delay in enumerate(BACKOFF_SECONDS):
        if delay >= seconds:
            return level
    raise ValueError(f"a delay is at most {MAX_NACK_DELAY_SECONDS} s")


def visible_at(stored_timestamp: int, level: int) -> int:
    """When a retry batch stored at ``stored_timestamp`` in queue ``level`` is due (the
    redrive queue's at once)."""
    if level == REDRIVE_QUEUE:
        return stored_timestamp
    return stored_timestamp + BACKOFF_SECONDS[level] * 1000


def redrive_queue(retry_topic_queues: int) -> int:
    """The queue of a retry topic with ``retry_topic_queues`` queues that redriven dead
    letters go to: :data:`REDRIVE_QUEUE`, or level 0 (due after its 10 s) in a retry topic
    created before that queue existed."""
    return REDRIVE_QUEUE if retry_topic_queues > REDRIVE_QUEUE else 0


def deliveries(message: StoredMessage, lease_attempt: int) -> int:
    """Deliveries of the message so far, this one included."""
    return message.system.reconsume_count + lease_attempt


@dataclass(frozen=True)
class Target:
    """Where a failed message goes: a retry level (0-15) or the dead-letter topic (16)."""

    number: int
    reason: str | None = None

    @property
    def dead(self) -> bool:
        return self.number == DLQ_TARGET


def target_for(
    message: StoredMessage,
    lease_attempt: int,
    max_attempts: int,
    *,
    nacked: bool,
    delay_seconds: int | None = None,
) -> Target:
    """The next stop of a message whose delivery ``lease_attempt`` failed."""
    done = deliveries(message, lease_attempt)
    if done >= max_attempts:
        return Target(DLQ_TARGET, REASON_NACKED if nacked else REASON_EXPIRED)
    if delay_seconds is not None:
        return Target(level_for_delay(delay_seconds))
    return Target(min(done - 1, RETRY_QUEUES - 1))


def moved_copy(message: StoredMessage, lease_attempt: int, target: Target) -> NewMessage:
    """The copy re-published to the retry or dead-letter topic: same id, body, tag, keys,
    properties and born time; its first place and how often it failed."""
    system = message.system
    return message.as_new(
        SystemFields(
            origin_topic=system.origin_topic or message.topic,
            origin_queue=system.origin_queue if system.origin_topic else message.queue,
            origin_offset=system.origin_offset if system.origin_topic else message.offset,
            reconsume_count=deliveries(message, lease_attempt),
            dead_letter_reason=target.reason,
            transaction_id=system.transaction_id,
        )
    )


DEAD_LETTER_DELIVERIES_PROPERTY = "cirrusmq.deliveries"
"""The property a dead letter appended to a dead-letter destination carries: how often it
was delivered before it died (as RocketMQ's dead letters keep their reconsume times)."""


def dead_letter_copy(
    message: StoredMessage, lease_attempt: int, target: Target, properties: dict[str, str]
) -> NewMessage:
    """A dead letter appended to the group's dead-letter destination (a user topic): a
    message of that topic (same id, body, tag, keys, group and born time, no origin, no
    attempts so far: the destination's groups count their own) with ``properties`` added,
    the deliveries it had (:data:`DEAD_LETTER_DELIVERIES_PROPERTY`) and the reason it died."""
    return replace(
        message.as_new(
            SystemFields(
                dead_letter_reason=target.reason, transaction_id=message.system.transaction_id
            )
        ),
        properties={
            **message.properties,
            **properties,
            DEAD_LETTER_DELIVERIES_PROPERTY: str(deliveries(message, lease_attempt)),
        },
    )


def first_queue(message: StoredMessage) -> int:
    """The queue the message was first stored in (its origin's, for a retry)."""
    system = message.system
    if system.origin_topic is not None and system.origin_queue is not None:
        return system.origin_queue
    return message.queue


def redriven_copy(message: StoredMessage) -> NewMessage:
    """A dead letter sent back to its group (in the group's retry topic): same id, its
    first place (shown as its topic, queue and offset), reconsume count reset to 0."""
    system = message.system
    return message.as_new(
        SystemFields(
            origin_topic=system.origin_topic,
            origin_queue=system.origin_queue,
            origin_offset=system.origin_offset,
            transaction_id=system.transaction_id,
        )
    )


def as_original(message: StoredMessage) -> StoredMessage:
    """A retry message as its consumer sees it: at its original topic, queue and offset."""
    system = message.system
    if system.origin_topic is None:
        return message
    return replace(
        message,
        topic=system.origin_topic,
        queue=system.origin_queue if system.origin_queue is not None else message.queue,
        offset=system.origin_offset if system.origin_offset is not None else message.offset,
    )
