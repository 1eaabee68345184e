"""Pure rules of delayed messages: delay levels, due times, delay groups (no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import DelayNotAllowed, InvalidDelay
from ..model import MessageType

DELAY_LEVELS_S = (
    1,
    5,
    10,
    30,
    60,
    120,
    180,
    240,
    300,
    360,
    420,
    480,
    540,
    600,
    1200,
    1800,
    3600,
    7200,
)
"""RocketMQ's delay levels 1-18: 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h."""
MAX_DELAY_MS = 365 * 24 * 3600 * 1000
"""A message may be due at most this far ahead (365 days)."""
MAX_DELAY_ITEMS_PER_SEND = 64
"""Delay items one send writes at most (one per target queue and due second): the send's
DynamoDB transaction holds them with the index items and the idempotency record (AWS: 100)."""
DELAYABLE_TYPES = (MessageType.NORMAL, MessageType.DELAY)
MINUTE_MS = 60_000
"""Delay items are partitioned by the minute they fall due in (:func:`due_minute`)."""


def level_delay_ms(level: int) -> int:
    """The delay of RocketMQ delay level ``level`` (1-18), in ms."""
    if not 1 <= level <= len(DELAY_LEVELS_S):
        raise InvalidDelay(f"delay_level must be 1-{len(DELAY_LEVELS_S)}, got {level}")
    return DELAY_LEVELS_S[level - 1] * 1000


def due_time(
    *,
    delay_level: int | None,
    delivery_timestamp: int | None,
    now: int,
    message_type: MessageType,
    what: str,
) -> int | None:
    """When a message is due (ms), or None when it is delivered at once.

    Past-due or zero delays are delivered at once; a level outside 1-18, a time beyond
    :data:`MAX_DELAY_MS` from now, both fields, or a delay on a FIFO/TRANSACTION topic is
    refused.
    """
    if delay_level is None and delivery_timestamp is None:
        return None
    if delay_level is not None and delivery_timestamp is not None:
        raise InvalidDelay(f"{what}: set delay_level or delivery_timestamp, not both")
    if message_type not in DELAYABLE_TYPES:
        raise DelayNotAllowed(
            f"{what}: a {message_type.value} topic takes no delayed messages "
            "(use a NORMAL or DELAY topic)"
        )
    if delay_level is not None:
        due = now + level_delay_ms(delay_level)
    else:
        assert delivery_timestamp is not None
        if delivery_timestamp < 0:
            raise InvalidDelay(f"{what}: delivery_timestamp must be ms since the epoch")
        due = delivery_timestamp
    if due - now > MAX_DELAY_MS:
        raise InvalidDelay(
            f"{what}: delivery_timestamp {due} is more than 365 days ahead "
            f"(at most {now + MAX_DELAY_MS})"
        )
    return due if due > now else None


@dataclass(frozen=True)
class DelayGroup:
    """Rows of a delay object that one delay item covers: one target queue, one due second."""

    queue: int
    due_ms: int
    """The latest due time of its rows: the item is moved then, never earlier for any row."""
    first_row: int
    count: int


def delay_groups(rows: Sequence[tuple[int, int]]) -> list[DelayGroup]:
    """Group rows ``(queue, due_ms)`` — already sorted by (queue, due second) — into runs of
    one queue and one due second."""
    groups: list[DelayGroup] = []
    start = 0
    for position in range(1, len(rows) + 1):
        if position == len(rows) or _slot(rows[position]) != _slot(rows[start]):
            run = rows[start:position]
            groups.append(DelayGroup(run[0][0], max(d for _, d in run), start, len(run)))
            start = position
    return groups


def _slot(row: tuple[int, int]) -> tuple[int, int]:
    return row[0], row[1] // 1000


def due_minute(due_ms: int) -> int:
    """The minute since the epoch of a time (ms): the delay items' partition of a due time,
    and the unit in which a release run walks them."""
    return due_ms // MINUTE_MS
