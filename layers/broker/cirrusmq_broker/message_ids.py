"""Two spellings of a ULID message id: its own (26 Crockford base-32 characters, as the SDK
and the broker make it) and the same 128 bits as a UUID (8-4-4-4-12 lowercase hex), which
SQS clients see. The spellings map one to one, so an id read in either form finds the one
message."""

from __future__ import annotations

import re
import uuid

from ulid import ULID

ULID_FORM = re.compile(r"^[0-7][0-9A-HJKMNP-TV-Z]{25}$")
"""A ULID as the SDK and the broker write it (upper case)."""
UUID_FORM = re.compile(
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
)


def as_uuid(message_id: str) -> str:
    """``message_id`` as SQS shows it: a ULID spelled as a UUID, any other id as it is."""
    if not ULID_FORM.fullmatch(message_id):
        return message_id
    return str(ULID.from_str(message_id).to_uuid())


def spellings(message_id: str) -> list[str]:
    """The stored ids ``message_id`` may name, the likelier first: for a UUID, the ULID of
    its 128 bits, then the id as written (a client may choose a UUID as its id)."""
    if not UUID_FORM.fullmatch(message_id):
        return [message_id]
    return [str(ULID.from_uuid(uuid.UUID(message_id))), message_id]


def new_message_id() -> str:
    """A fresh message id, as the broker makes one: a ULID of now."""
    return str(ULID())
