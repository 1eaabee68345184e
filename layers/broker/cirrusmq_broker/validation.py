"""Checks on names and message fields; each failure raises a typed broker error."""

from __future__ import annotations

import re

from . import limits
from .errors import InvalidGroupName, InvalidMessage, InvalidRequest, InvalidTopicName

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,127}$")
MESSAGE_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
TAG_FORBIDDEN = re.compile(r"[\s|]")


def check_topic_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidTopicName(
            f"invalid topic name {name[:140]!r}: use 1-127 characters of A-Z a-z 0-9 _ -"
        )
    return name


def check_group_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidGroupName(
            f"invalid group name {name[:140]!r}: use 1-127 characters of A-Z a-z 0-9 _ -"
        )
    return name


def check_text(value: str, what: str) -> str:
    """Refuse text that is not valid Unicode (lone surrogates cannot be stored as UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessage(f"{what} is not valid Unicode text") from exc
    return value


def check_tag(tag: str) -> str:
    check_text(tag, "tag")
    if not tag or len(tag) > limits.MAX_TAG_CHARS or TAG_FORBIDDEN.search(tag) or tag == "*":
        raise InvalidMessage(
            f"invalid tag {tag[:140]!r}: 1-{limits.MAX_TAG_CHARS} characters, "
            "no whitespace, no '|', not '*'"
        )
    return tag


def check_message_id(message_id: str) -> str:
    if not MESSAGE_ID_PATTERN.fullmatch(message_id):
        raise InvalidMessage(
            f"invalid message id {message_id[:140]!r}: 1-128 characters of A-Z a-z 0-9 _ . : -"
        )
    return message_id


def check_keys(keys: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if len(keys) > limits.MAX_KEYS:
        raise InvalidMessage(f"a message has at most {limits.MAX_KEYS} keys")
    for key in keys:
        check_text(key, "a key")
        if not key or len(key) > limits.MAX_KEY_CHARS:
            raise InvalidMessage(f"a key has 1-{limits.MAX_KEY_CHARS} characters")
    return tuple(keys)


def check_properties(properties: dict[str, str]) -> dict[str, str]:
    if len(properties) > limits.MAX_PROPERTIES:
        raise InvalidMessage(f"a message has at most {limits.MAX_PROPERTIES} properties")
    for name, value in properties.items():
        check_text(name, "a property name")
        check_text(value, "a property value")
        if not name or len(name) > limits.MAX_PROPERTY_CHARS:
            raise InvalidMessage(f"a property name has 1-{limits.MAX_PROPERTY_CHARS} characters")
        if len(value) > limits.MAX_PROPERTY_CHARS:
            raise InvalidMessage(f"property {name!r} is over {limits.MAX_PROPERTY_CHARS} chars")
    return dict(properties)


def check_message_group(group: str) -> str:
    check_text(group, "the message group")
    if not group or len(group) > limits.MAX_KEY_CHARS:
        raise InvalidMessage(f"a message group has 1-{limits.MAX_KEY_CHARS} characters")
    return group


def check_producer_id(producer_id: str) -> str:
    if not MESSAGE_ID_PATTERN.fullmatch(producer_id):
        raise InvalidRequest(
            f"invalid producer id {producer_id[:140]!r}: 1-128 characters of A-Z a-z 0-9 _ . : -"
        )
    return producer_id


MAX_TIMESTAMP_MS = 253_402_300_799_999
"""9999-12-31T23:59:59.999Z: the last instant Parquet/Arrow timestamps (ms) round-trip."""


def check_timestamp(value: int, what: str) -> int:
    if not 0 <= value <= MAX_TIMESTAMP_MS:
        raise InvalidMessage(f"{what} must be milliseconds since the epoch (0-{MAX_TIMESTAMP_MS})")
    return value
