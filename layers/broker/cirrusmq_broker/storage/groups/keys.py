"""Every sort key (``stream``) of GroupsTable, whose partition key is the group's name.

Per (group, topic, queue): the queue's summary ``<topic>#<queue>`` and one item per open
lease ``<topic>#<queue>#L<start>`` (``m`` appended for a message moved out by
change_invisible). Per (group, topic): the subscription ``<topic>#subscription``. Items
that are not a queue's state start with ``#`` (the group's settings, its dead-letter marks,
moved marks) or ``.`` (the consumer registry): topic names start with neither.
"""

from __future__ import annotations

from typing import Any

from ...model import stream_id
from ...rules.group_state import LeaseSlot

SUBSCRIPTION_SUFFIX = "#subscription"
LEASE_MARK = "#L"
INTERNAL_MARK = "#"
"""Group items whose sort key starts with this are not queue states."""
MOVED_MARK = "#moved."
"""Sort-key prefix of a moved mark: the offsets a move forwarded from a lease it deleted."""
CONFIG_STREAM = "#config"
"""The group's settings (max_delivery_attempts)."""
DLQ_STREAM = "#dlq"
"""The group's dead-letter marks (purge floor, redrive cursors)."""
NOT_A_STREAM = "."
"""Items of a group whose sort key starts with this are not queue states (topic names have no
dot): the consumer registry."""
REGISTRY_STREAM = ".consumers"
"""The group's live consumers (heartbeats, orderly locks' owners)."""


def item_key(group: str, stream: str) -> dict[str, Any]:
    """The primary key of a group's item (plain values)."""
    return {"group_name": group, "stream": stream}


def summary_stream(topic: str, queue: int) -> str:
    return stream_id(topic, queue)


def subscription_stream(topic: str) -> str:
    return topic + SUBSCRIPTION_SUFFIX


def lease_prefix(topic: str, queue: int) -> str:
    """What every lease item of the queue's sort key starts with."""
    return stream_id(topic, queue) + LEASE_MARK


def lease_prefix_end(topic: str, queue: int) -> str:
    """A sort key above every lease item of the queue (for a BETWEEN query)."""
    return lease_prefix(topic, queue) + "~"


def lease_stream(topic: str, queue: int, slot: LeaseSlot) -> str:
    start, single = slot
    return f"{lease_prefix(topic, queue)}{start:020d}{'m' if single else ''}"


def mark_stream(topic: str, queue: int, lease_id: str) -> str:
    """The moved mark of lease ``lease_id`` of the queue."""
    return f"{MOVED_MARK}{stream_id(topic, queue)}.{lease_id}"
