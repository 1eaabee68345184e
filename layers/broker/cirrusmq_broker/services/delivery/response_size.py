"""How many bytes a receive response may take, and what one message takes in it."""

from __future__ import annotations

import json

from ... import limits
from ...model import StoredMessage

RESPONSE_BYTE_BUDGET = limits.MAX_REQUEST_BYTES - 256 * 1024
"""What the messages of one receive response may take, as serialized (:func:`wire_size`)."""
MESSAGE_OVERHEAD_BYTES = 1536
"""One message's field names, numbers and receipt handle as serialized (the longest group
and topic names make a retry delivery's handle, which names ``retry.<group>.<topic>``,
about 900 bytes)."""


def wire_size(message: StoredMessage) -> int:
    """An upper bound of the bytes ``message`` takes in a receive response: its base64 body
    and its text fields as JSON strings (non-ASCII escaped as ``\\uXXXX``, what the API's
    serializer writes) inside the Lambda response, which escapes each quote and backslash
    of the body once more."""
    body = 4 * ((len(message.body) + 2) // 3)
    texts = [
        message.message_id,
        message.topic,
        message.tag or "",
        message.message_group or "",
        *message.keys,
        *message.properties.keys(),
        *message.properties.values(),
    ]
    return body + sum(map(json_text_bytes, texts)) + MESSAGE_OVERHEAD_BYTES


def json_text_bytes(text: str) -> int:
    """Bytes of ``text`` as a JSON string (ASCII-only) within a JSON string."""
    if text.isascii() and text.isprintable():  # the usual case, without an encoding pass
        escaped = text.count('"') + text.count("\\")
        return len(text) + 4 + 3 * escaped
    encoded = json.dumps(text)
    return len(encoded) + encoded.count("\\") + encoded.count('"')


def fitting(messages: list[StoredMessage], bytes_left: int, *, first: bool) -> tuple[int, int]:
    """How many of ``messages`` fit in the response, and their bytes (the first one always
    does when ``first``)."""
    count = used = 0
    for message in messages:
        size = wire_size(message)
        if used + size > bytes_left and not (first and count == 0):
            break
        count, used = count + 1, used + size
    return count, used
