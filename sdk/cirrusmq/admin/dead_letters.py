"""Group settings and dead letters for :class:`cirrusmq.Admin`.

``max_delivery_attempts`` counts deliveries (the first one included): the default 16 is
RocketMQ's ``maxReconsumeTimes`` = 15 plus the first delivery. After the last one a message
goes to the group's dead-letter topic ``dlq.<group>``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..wire import read_bool, read_int, read_list, read_str


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter of a group."""

    dlq_offset: int
    """Its place in the group's dead-letter topic (``start`` for listing)."""
    message_id: str
    origin_topic: str | None
    origin_queue: int | None
    origin_offset: int | None
    delivery_attempts: int
    reason: str | None
    stored_timestamp: int
    """When it became a dead letter (ms)."""
    born_timestamp: int
    tag: str | None
    keys: tuple[str, ...]
    body_preview: bytes
    """The body's first 256 bytes."""
    body_bytes: int
    redriven: bool = False
    """Sent back to its group by a redrive already (it stays listed until purged)."""

    @classmethod
    def from_wire(cls, data: Any) -> DeadLetter:
        def optional(name: str) -> Any:
            return data.get(name) if isinstance(data, dict) else None

        return cls(
            dlq_offset=read_int(data, "dlq_offset"),
            message_id=read_str(data, "message_id"),
            origin_topic=optional("origin_topic"),
            origin_queue=optional("origin_queue"),
            origin_offset=optional("origin_offset"),
            delivery_attempts=read_int(data, "delivery_attempts"),
            reason=optional("reason"),
            stored_timestamp=read_int(data, "stored_timestamp"),
            born_timestamp=read_int(data, "born_timestamp"),
            tag=optional("tag"),
            keys=tuple(optional("keys") or ()),
            body_preview=base64.b64decode(read_str(data, "body_preview")),
            body_bytes=read_int(data, "body_bytes"),
            redriven=read_bool(data, "redriven", False),
        )


@dataclass(frozen=True)
class DeadLetterPage:
    dead_letters: tuple[DeadLetter, ...]
    next_start: int | None
    """Pass as ``start`` for the next page (None: nothing more for now)."""


@dataclass(frozen=True)
class RedriveSummary:
    redriven: int
    """Dead letters sent back to the group (same message id, attempts start again)."""
    skipped: int
    """Dead letters whose topic no longer exists (they stay in the DLQ)."""
    requests: int


Request = Callable[..., Any]


def update_group(request: Request, path: str, max_delivery_attempts: int) -> int:
    body = request("PUT", path, json_body={"max_delivery_attempts": max_delivery_attempts})
    return read_int(body, "max_delivery_attempts")


def list_dead_letters(
    request: Request, path: str, topic: str | None, limit: int, start: int
) -> DeadLetterPage:
    params: dict[str, Any] = {"limit": str(limit), "start": str(start)}
    if topic is not None:
        params["topic"] = topic
    body = request("GET", f"{path}/dead-letters", params=params)
    next_start = body.get("next_start") if isinstance(body, dict) else None
    return DeadLetterPage(
        tuple(DeadLetter.from_wire(d) for d in read_list(body, "dead_letters")),
        next_start if isinstance(next_start, int) else None,
    )


def redrive_dead_letters(
    request: Request,
    path: str,
    *,
    topic: str | None,
    message_ids: list[str] | None,
    max_messages: int | None,
    rate: float | None,
    sleep: Callable[[float], None] = time.sleep,
) -> RedriveSummary:
    """Call the redrive route until done (or ``max_messages`` redriven), at most ``rate``
    messages per second. Resumable: the service keeps the cursor."""
    if rate is not None and rate <= 0:
        raise ValueError("rate must be > 0 messages per second")
    redriven = skipped = requests = 0
    start = 0  # a redrive by ids goes on from the service's next_offset
    while True:
        room = 1000 if max_messages is None else max_messages - redriven
        if room <= 0:
            break
        step = min(room, 1000, max(1, int(rate)) if rate else 1000)
        started = time.monotonic()
        document: dict[str, Any] = {"max_messages": step}
        if topic is not None:
            document["topic"] = topic
        if message_ids is not None:
            document["message_ids"] = message_ids
            if start:
                document["start"] = start
        body = request("POST", f"{path}/dead-letters/redrive", json_body=document)
        requests += 1
        moved = read_int(body, "redriven")
        redriven, skipped = redriven + moved, skipped + read_int(body, "skipped")
        if read_bool(body, "done"):
            break
        if message_ids is not None:
            start = read_int(body, "next_offset")
        if rate:
            sleep(max(0.0, moved / rate - (time.monotonic() - started)))
    return RedriveSummary(redriven, skipped, requests)


def purge_dead_letters(request: Request, path: str, before: int | None) -> int:
    body = request(
        "POST", f"{path}/dead-letters/purge", json_body={} if before is None else {"before": before}
    )
    return read_int(body, "floor")
