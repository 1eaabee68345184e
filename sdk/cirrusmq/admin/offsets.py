"""Queue offsets and offset reset (rewind) for :class:`~cirrusmq.admin.Admin`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from ..transport import Transport
from ..wire import read_bool, read_int, read_list, read_optional_int, read_optional_str, read_str

__all__ = ["OffsetReset", "QueueOffsetInfo", "QueueReset", "reset_offsets", "topic_offsets"]

ResetTarget = str | int | datetime | Mapping[int, int]
"""``"earliest"``, ``"latest"``, a timestamp (ms since the epoch, or a datetime), or
``{queue: offset}``."""


@dataclass(frozen=True)
class QueueOffsetInfo:
    queue: int
    min_offset: int
    max_offset: int
    timestamp_offset: int | None = None
    """The lowest offset stored at or after the timestamp asked for (None if none asked)."""


@dataclass(frozen=True)
class QueueReset:
    queue: int
    offset: int
    """Where the group's cursor and committed offset are now."""
    requested_offset: int
    min_offset: int
    max_offset: int
    truncated: bool
    """Part of what was asked for is past retention: it starts at the earliest retained."""
    previous_committed: int
    previous_cursor: int
    dropped_leases: int


@dataclass(frozen=True)
class OffsetReset:
    group: str
    topic: str
    to: str
    timestamp: int | None
    queues: tuple[QueueReset, ...]
    note: str | None
    """Which queues started at the earliest retained offset (None if none)."""

    @property
    def truncated(self) -> bool:
        return any(q.truncated for q in self.queues)


def topic_offsets(
    transport: Transport, topic: str, *, timestamp: int | datetime | None = None
) -> list[QueueOffsetInfo]:
    params = None
    if timestamp is not None:
        params = {"timestamp": str(_ms(timestamp))}
    body = transport.request("GET", f"/v1/topics/{quote(topic, safe='')}/offsets", params=params)
    return [
        QueueOffsetInfo(
            read_int(q, "queue"),
            read_int(q, "min_offset"),
            read_int(q, "max_offset"),
            read_optional_int(q, "timestamp_offset"),
        )
        for q in read_list(body, "queues")
    ]


def reset_body(to: ResetTarget) -> dict[str, Any]:
    """The JSON body of a reset to ``to``."""
    if isinstance(to, str):
        if to not in ("earliest", "latest"):
            raise ValueError("to must be 'earliest', 'latest', a timestamp or {queue: offset}")
        return {"to": to}
    if isinstance(to, Mapping):
        return {"to": "offset", "offsets": {str(int(q)): int(o) for q, o in to.items()}}
    if isinstance(to, bool):
        raise ValueError("to must be 'earliest', 'latest', a timestamp or {queue: offset}")
    return {"to": "timestamp", "timestamp": _ms(to)}


def reset_offsets(transport: Transport, group: str, topic: str, to: ResetTarget) -> OffsetReset:
    path = f"/v1/groups/{quote(group, safe='')}/offsets/{quote(topic, safe='')}/reset"
    body = transport.request("POST", path, json_body=reset_body(to))
    return OffsetReset(
        read_str(body, "group"),
        read_str(body, "topic"),
        read_str(body, "to"),
        read_optional_int(body, "timestamp"),
        tuple(
            QueueReset(
                read_int(q, "queue"),
                read_int(q, "offset"),
                read_int(q, "requested_offset"),
                read_int(q, "min_offset"),
                read_int(q, "max_offset"),
                read_bool(q, "truncated"),
                read_int(q, "previous_committed"),
                read_int(q, "previous_cursor"),
                read_int(q, "dropped_leases"),
            )
            for q in read_list(body, "queues")
        ),
        read_optional_str(body, "note"),
    )


def _ms(value: int | datetime) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)
