"""SQS message attributes ↔ a CirrusMQ message's tag, keys and properties.

- ``cirrusmq.tag`` (String) is the message's tag; ``cirrusmq.keys`` (String) its keys,
  separated by spaces.
- Every other attribute is a property of the same name whose value is the attribute's
  ``StringValue`` (``BinaryValue``: its base64 text). An attribute whose data type is not
  plain ``String`` (``Number``, ``Binary``, ``String.x``, ...) records its type in the one
  property ``sqs.types`` (a JSON object name → data type), so a receive through SQS gives it
  back as sent; a property of a message sent another way is a ``String`` attribute.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from cirrusmq_broker.model import StoredMessage
from cirrusmq_broker.rules.retries import DEAD_LETTER_DELIVERIES_PROPERTY

from .errors import invalid_parameter

TAG_ATTRIBUTE = "cirrusmq.tag"
KEYS_ATTRIBUTE = "cirrusmq.keys"
TYPES_PROPERTY = "sqs.types"
SOURCE_PROPERTY = "sqs.source"
"""The property a dead letter carries in its dead-letter queue: the queue it died in."""
SENDER_PROPERTY = "sqs.sender"
"""The access key that sent the message (its SenderId)."""
TRACE_PROPERTY = "sqs.trace"
"""The message's AWSTraceHeader system attribute."""
DEDUP_ID_PROPERTY = "sqs:dedup"
"""A FIFO message's deduplication id (its system attribute); ``:`` is in no attribute name."""
HIDDEN_PROPERTIES = frozenset(
    {
        SOURCE_PROPERTY,
        SENDER_PROPERTY,
        TRACE_PROPERTY,
        DEDUP_ID_PROPERTY,
        DEAD_LETTER_DELIVERIES_PROPERTY,
    }
)
"""Properties CirrusMQ writes for itself (a dead letter's source queue and the deliveries it
had there, the sender, the trace header, a FIFO message's deduplication id), not attributes."""
MAX_ATTRIBUTES = 10
_NAME = re.compile(r"[\w.-]{1,256}")
"""An attribute name: (Unicode) letters and digits, ``_``, ``-`` and ``.``."""
_TYPE = re.compile(r"(String|Number|Binary)(\.[A-Za-z0-9_.-]{1,200})?")
INVALID_TEXT = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters SQS takes in no body or string value (XML 1.0's; a lone surrogate among them)."""
REPLACEMENT = "\ufffd"


def sqs_text(text: str) -> str:
    """``text`` as SQS can carry it: a character SQS refuses on send (stored through another
    protocol) becomes U+FFFD, so no answer is invalid XML and the digests match the text."""
    return INVALID_TEXT.sub(REPLACEMENT, text)


def check_attributes(attributes: object) -> dict[str, dict[str, Any]]:
    """Validated message attributes (the JSON request shape)."""
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise invalid_parameter("MessageAttributes must be a map.")
    if len(attributes) > MAX_ATTRIBUTES:
        raise invalid_parameter(
            f"Number of message attributes [{len(attributes)}] exceeds the allowed maximum "
            f"[{MAX_ATTRIBUTES}]."
        )
    checked: dict[str, dict[str, Any]] = {}
    for name, value in attributes.items():
        if (
            not _NAME.fullmatch(name)
            or name.lower().startswith(("aws.", "amazon."))
            or ".." in name
            or name.startswith(".")
            or name.endswith(".")
            or name == TYPES_PROPERTY
            or name in HIDDEN_PROPERTIES  # set by CirrusMQ only: a move task routes by one
        ):
            raise invalid_parameter(f"The message attribute name '{name[:256]}' is invalid.")
        if not isinstance(value, dict):
            raise invalid_parameter(f"The message attribute '{name}' must have a value.")
        data_type = value.get("DataType")
        if not isinstance(data_type, str) or not _TYPE.fullmatch(data_type):
            raise invalid_parameter(
                f"The message attribute '{name}' has an invalid message attribute type."
            )
        base = data_type.split(".", 1)[0]
        if base == "Binary":
            raw = value.get("BinaryValue")
            try:
                if not isinstance(raw, str) or not raw:
                    raise ValueError
                base64.b64decode(raw, validate=True)
            except (ValueError, binascii.Error):
                raise invalid_parameter(
                    f"The message attribute '{name}' with type 'Binary' must use field 'Binary'."
                ) from None
            checked[name] = {"DataType": data_type, "BinaryValue": raw}
            continue
        text = value.get("StringValue")
        if text == "":
            raise invalid_parameter(
                f"Message (user) attribute '{name}' must contain a non-empty value of type "
                f"'{base}'."
            )
        if not isinstance(text, str):
            raise invalid_parameter(
                f"The message attribute '{name}' with type '{base}' must use field 'String'."
            )
        if INVALID_TEXT.search(text):
            raise invalid_parameter(
                f"The message attribute '{name}' has invalid characters in its value."
            )
        if base == "Number":
            try:
                Decimal(text)
            except InvalidOperation:
                raise invalid_parameter(
                    f"Can't cast the value of message (user) attribute '{name}' to a number."
                ) from None
        checked[name] = {"DataType": data_type, "StringValue": text}
    return checked


def to_message_fields(attributes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The MessageInput fields (tag, keys, properties) the attributes become."""
    tag, keys, properties, types = None, (), {}, {}
    for name, value in attributes.items():
        text = value.get("StringValue")
        if name == TAG_ATTRIBUTE and value["DataType"] == "String":
            tag = text
        elif name == KEYS_ATTRIBUTE and value["DataType"] == "String":
            keys = tuple(k for k in str(text).split(" ") if k)
        else:
            properties[name] = text if text is not None else value["BinaryValue"]
            if value["DataType"] != "String":
                types[name] = value["DataType"]
    if types:
        properties[TYPES_PROPERTY] = json.dumps(types, separators=(",", ":"), sort_keys=True)
    return {"tag": tag, "keys": keys, "properties": properties}


def from_message(message: StoredMessage) -> dict[str, dict[str, Any]]:
    """A stored message's attributes as SQS gives them."""
    properties = {k: v for k, v in message.properties.items() if k not in HIDDEN_PROPERTIES}
    try:
        types = json.loads(properties.pop(TYPES_PROPERTY, "{}"))
    except ValueError:
        types = {}
    if not isinstance(types, dict):
        types = {}
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in properties.items():
        data_type = sqs_text(str(types.get(name, "String")))
        field = "BinaryValue" if data_type.startswith("Binary") else "StringValue"
        attributes[sqs_text(name)] = {"DataType": data_type, field: sqs_text(value)}
    if message.tag:
        attributes[TAG_ATTRIBUTE] = {"DataType": "String", "StringValue": sqs_text(message.tag)}
    if message.keys:
        keys = sqs_text(" ".join(message.keys))
        attributes[KEYS_ATTRIBUTE] = {"DataType": "String", "StringValue": keys}
    return attributes


def select(
    attributes: dict[str, dict[str, Any]], names: list[str] | None
) -> dict[str, dict[str, Any]]:
    """The attributes a receive asked for (``All``, ``*``, ``.*``, names, or ``prefix.*``:
    the names starting with ``prefix``, as SQS reads it)."""
    if not names:
        return {}
    if "All" in names or ".*" in names or "*" in names:
        return attributes
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*"))
    return {
        k: v for k, v in attributes.items() if k in names or (prefixes and k.startswith(prefixes))
    }


def check_system_attributes(attributes: object) -> dict[str, str]:
    """A send's MessageSystemAttributes: only ``AWSTraceHeader`` (a String), as in SQS; the
    properties that keep it."""
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise invalid_parameter("MessageSystemAttributes must be a map.")
    kept: dict[str, str] = {}
    for name, value in attributes.items():
        if name != "AWSTraceHeader":
            raise invalid_parameter(
                f"Message system attribute name '{str(name)[:256]}' is invalid."
            )
        text = value.get("StringValue") if isinstance(value, dict) else None
        if value.get("DataType") != "String" or not isinstance(text, str) or not text:
            raise invalid_parameter(
                "Message system attribute AWSTraceHeader must be a String with a value."
            )
        if INVALID_TEXT.search(text) or len(text) > 1024:
            raise invalid_parameter("Message system attribute AWSTraceHeader is invalid.")
        kept[TRACE_PROPERTY] = text
    return kept


def trace_from_header(header: str | None) -> dict[str, str]:
    """The property that keeps a request's ``X-Amzn-Trace-Id`` header as the message's
    ``AWSTraceHeader``; a header SQS could not keep (empty, too long, characters outside
    SQS's set) is not kept."""
    if not header or len(header) > 1024 or INVALID_TEXT.search(header):
        return {}
    return {TRACE_PROPERTY: header}
