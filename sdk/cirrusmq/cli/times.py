"""Times given on the command line: milliseconds since the epoch or ISO 8601."""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["parse_timestamp"]


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch from digits (ms) or an ISO-8601 time (UTC if no zone)."""
    text = text.strip()
    if re.fullmatch(r"[0-9]+", text):  # ASCII digits only ("²".isdigit() is True)
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{text!r} is not a timestamp: give milliseconds since the epoch or an ISO-8601 "
            "time such as 2026-11-23T03:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
