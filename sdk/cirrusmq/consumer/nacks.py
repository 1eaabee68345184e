"""Nack ("reconsume later"): give received messages back to the service.

A nacked message goes to its group's retry topic and is delivered again after a backoff
(10s 30s 1m 2m ... 2h by delivery attempt), or no earlier than ``delay`` (the smallest
backoff level of at least it; at most 2 h); after the group's ``max_delivery_attempts`` it
goes to the group's dead-letter topic. The result per message is an
:class:`~cirrusmq.consumer.acks.AckResult` (``acked`` = given back).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from .acks import AckResult, handles_of, parse_ack_response

MAX_NACK_DELAY_S = 7200
MAX_NACK_HANDLES = 1000


def nack_requests(
    messages: Iterable[Any], delay: float | timedelta | None
) -> list[tuple[list[str], dict[str, Any]]]:
    """(handles, JSON body) of the nack requests for ``messages``, 1,000 handles each."""
    handles = list(dict.fromkeys(h for h, _ in handles_of(messages)))
    body_extra: dict[str, Any] = {}
    if delay is not None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
        if not 0 <= seconds <= MAX_NACK_DELAY_S:
            raise ValueError(f"delay must be 0-{MAX_NACK_DELAY_S} seconds")
        body_extra["delay_seconds"] = int(-(-seconds // 1))  # rounded up: never early
    return [
        (chunk, {"receipt_handles": chunk, **body_extra})
        for chunk in (
            handles[i : i + MAX_NACK_HANDLES] for i in range(0, len(handles), MAX_NACK_HANDLES)
        )
    ]


def nack_results(handles: list[str], body: Any) -> list[AckResult]:
    return parse_ack_response(handles, body)
