"""SQS receipt handles: the broker's receipt handle and the time of the receive that issued it.

SQS ends a message's visibility at most 12 hours after the ``ReceiveMessage`` that issued
its handle: extending it does not move that limit, a new receive does. The broker keeps no
receive time per message, so the handle carries it: ``<broker handle>~<receive ms, base
36>`` (a broker handle is URL-safe base64 and ``.``: never ``~``). The time is not signed:
a client that alters it moves only its own limit, never another consumer's message. A
handle without it (issued before handles carried it) has no limit but the range's.
"""

from __future__ import annotations

from .errors import SqsError

SEPARATOR = "~"
MAX_STAMP_CHARS = 13
"""Base 36 digits of a receive time: 13 hold any 64-bit millisecond count."""
MAX_TOTAL_VISIBILITY_SECONDS = 43_200
"""Visibility ends at most this long after the receive that issued the handle."""


def issue(broker_handle: str, received_ms: int) -> str:
    """The SQS handle of ``broker_handle``, delivered by a receive at ``received_ms``."""
    return f"{broker_handle}{SEPARATOR}{_base36(received_ms)}"


def broker_handle(handle: str) -> str:
    """The broker's receipt handle inside an SQS handle."""
    return split(handle)[0]


def split(handle: str) -> tuple[str, int | None]:
    """(the broker handle, the receive's time in ms or None when the handle has none)."""
    inner, separator, stamp = handle.rpartition(SEPARATOR)
    if not separator or not stamp.isascii() or not stamp.isalnum() or len(stamp) > MAX_STAMP_CHARS:
        return handle, None  # no time of ours: the broker judges the whole handle
    return inner, int(stamp, 36)


def check_total_visibility(handle: str, timeout_s: int, now_ms: int) -> None:
    """InvalidParameterValue if a visibility of ``timeout_s`` from ``now_ms`` ends more than
    :data:`MAX_TOTAL_VISIBILITY_SECONDS` after the handle's receive."""
    _, received_ms = split(handle)
    if received_ms is None:
        return
    if now_ms + timeout_s * 1000 > received_ms + MAX_TOTAL_VISIBILITY_SECONDS * 1000:
        raise SqsError(
            "InvalidParameterValue",
            f"Value {timeout_s} for parameter VisibilityTimeout is invalid. Reason: Total "
            f"VisibilityTimeout for the message is beyond the limit "
            f"[{MAX_TOTAL_VISIBILITY_SECONDS} seconds]",
        )


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if not number:
            return text
