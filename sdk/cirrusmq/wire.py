"""Strict readers for the service's JSON answers.

A response of the wrong shape (a field missing or of the wrong type, a body that is not base64)
raises :class:`~cirrusmq.errors.TransportError` ("malformed response"), never ``KeyError`` or
``TypeError``: whatever the service (or a proxy in front of it) answers, the SDK raises one of
its own :class:`~cirrusmq.errors.MQError` subclasses.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from .errors import TransportError

__all__ = [
    "malformed",
    "read_base64",
    "read_bool",
    "read_int",
    "read_list",
    "read_mapping",
    "read_optional_int",
    "read_optional_str",
    "read_str",
    "read_str_list",
    "read_str_map",
]


def malformed(what: str) -> TransportError:
    """The error for a response that does not have the expected shape."""
    return TransportError(f"malformed response: {what}")


def read_mapping(value: Any, what: str = "body") -> Mapping[str, Any]:
    """``value`` if it is a JSON object."""
    if not isinstance(value, Mapping):
        raise malformed(f"{what} is not an object")
    return value


def _field(data: Any, name: str) -> Any:
    data = read_mapping(data)
    if name not in data:
        raise malformed(f"{name!r} is missing")
    return data[name]


def read_str(data: Any, name: str) -> str:
    """The string field ``name`` of the object ``data``."""
    value = _field(data, name)
    if not isinstance(value, str):
        raise malformed(f"{name!r} is not a string")
    return value


def read_optional_str(data: Any, name: str) -> str | None:
    """The string field ``name``, or ``None`` when absent or null."""
    value = read_mapping(data).get(name)
    if value is not None and not isinstance(value, str):
        raise malformed(f"{name!r} is not a string")
    return value


def read_int(data: Any, name: str) -> int:
    """The integer field ``name`` (booleans are not integers here)."""
    value = _field(data, name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise malformed(f"{name!r} is not an integer")
    return value


def read_optional_int(data: Any, name: str, default: int | None = None) -> int | None:
    """The integer field ``name``, or ``default`` when absent or null."""
    if read_mapping(data).get(name) is None:
        return default
    return read_int(data, name)


def read_bool(data: Any, name: str, default: bool | None = None) -> bool:
    """The boolean field ``name`` (``default`` when absent, if given)."""
    mapping = read_mapping(data)
    if name not in mapping and default is not None:
        return default
    value = _field(mapping, name)
    if not isinstance(value, bool):
        raise malformed(f"{name!r} is not a boolean")
    return value


def read_list(data: Any, name: str, *, optional: bool = False) -> list[Any]:
    """The array field ``name`` (``[]`` when absent or null and ``optional``)."""
    mapping = read_mapping(data)
    if optional and mapping.get(name) is None:
        return []
    value = _field(mapping, name)
    if not isinstance(value, list):
        raise malformed(f"{name!r} is not an array")
    return value


def read_str_list(data: Any, name: str, *, optional: bool = True) -> tuple[str, ...]:
    """The array of strings ``name`` (empty when absent or null and ``optional``)."""
    items = read_list(data, name, optional=optional)
    if not all(isinstance(item, str) for item in items):
        raise malformed(f"{name!r} holds something other than strings")
    return tuple(items)


def read_str_map(data: Any, name: str) -> dict[str, str]:
    """The string-to-string object ``name`` (empty when absent or null)."""
    value = read_mapping(data).get(name)
    if value is None:
        return {}
    value = read_mapping(value, repr(name))
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise malformed(f"{name!r} is not a string-to-string object")
    return dict(value)


def read_base64(data: Any, name: str) -> bytes:
    """The bytes of the base64 string field ``name``."""
    text = read_str(data, name)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise malformed(f"{name!r} is not base64") from exc
