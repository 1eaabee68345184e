"""Checks on names and message fields; each failure raises a typed broker error."""

from __future__ import annotations

import re

from . import limits
from .errors import InvalidGroupName, InvalidMessage, InvalidRequest, InvalidTopicName

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,127}$")
MESSAGE_ID_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
TAG_FORBIDDEN = re.compile(r"[\s|]")


def check_topic_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise InvalidTopicName(
            f"invalid topic name {name[:140]!r}: use 1-127 characters of A-Z a-z 0-9 _ -"
        )
    return name


def check_group_name(name: str) -> str:
    if not NAME_PATTERN.match(name):
        raise InvalidGroupName(
            f"invalid group name {name[:140]!r}: use 1-127 characters of A-Z a-z 0-9 _ -"
        )
    return name


def check_tag(tag: str) -> str:
    if not tag or len(tag) > limits.MAX_TAG_CHARS or TAG_FORBIDDEN.search(tag) or tag == "*":
        raise InvalidMessage(
            f"invalid tag {tag[:140]!r}: 1-{limits.MAX_TAG_CHARS} characters, "
            "no whitespace, no '|', not '*'"
        )
    return tag


def check_message_id(message_id: str) -> str:
    if not MESSAGE_ID_PATTERN.match(message_id):
        raise InvalidMessage(
            f"invalid message id {message_id[:140]!r}: 1-128 characters of A-Z a-z 0-9 _ . : -"
        )
    return message_id


def check_keys(keys: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    if len(keys) > limits.MAX_KEYS:
        raise InvalidMessage(f"a message has at most {limits.MAX_KEYS} keys")
    for key in keys:
        if not key or len(key) > limits.MAX_KEY_CHARS:
            raise InvalidMessage(f"a key has 1-{limits.MAX_KEY_CHARS} characters")
    return tuple(keys)


def check_properties(properties: dict[str, str]) -> dict[str, str]:
    if len(properties) > limits.MAX_PROPERTIES:
        raise InvalidMessage(f"a message has at most {limits.MAX_PROPERTIES} properties")
    for name, value in properties.items():
        if not name or len(name) > limits.MAX_PROPERTY_CHARS:
            raise InvalidMessage(f"a property name has 1-{limits.MAX_PROPERTY_CHARS} characters")
        if len(value) > limits.MAX_PROPERTY_CHARS:
            raise InvalidMessage(f"property {name!r} is over {limits.MAX_PROPERTY_CHARS} chars")
    return dict(properties)


def check_message_group(group: str) -> str:
    if not group or len(group) > limits.MAX_KEY_CHARS:
        raise InvalidMessage(f"a message group has 1-{limits.MAX_KEY_CHARS} characters")
    return group


def check_producer_id(producer_id: str) -> str:
    if not MESSAGE_ID_PATTERN.match(producer_id):
        raise InvalidRequest(
            f"invalid producer id {producer_id[:140]!r}: 1-128 characters of A-Z a-z 0-9 _ . : -"
        )
    return producer_id
