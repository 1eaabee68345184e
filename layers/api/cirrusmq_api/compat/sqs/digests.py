"""The MD5 digests SQS returns: of the body, and of the message attributes.

The attributes' digest (SQS's algorithm, which SDKs check): for each attribute in name
order, the name, the data type and the value, each as a 4-byte big-endian length and its
bytes, with a transport byte before the value (1 for a string value, 2 for a binary one).
"""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Mapping
from typing import Any

_STRING, _BINARY = 1, 2


def md5_of_body(body: str) -> str:
    return hashlib.md5(body.encode("utf-8")).hexdigest()  # noqa: S324 - SQS's digest


def md5_of_attributes(attributes: Mapping[str, Mapping[str, Any]]) -> str:
    """Of message attributes in the JSON request shape (``BinaryValue`` base64 text)."""
    digest = hashlib.md5()  # noqa: S324 - SQS's digest
    for name in sorted(attributes):
        value = attributes[name]
        _add(digest, name.encode("utf-8"))
        _add(digest, str(value["DataType"]).encode("utf-8"))
        if value.get("StringValue") is not None:
            digest.update(bytes([_STRING]))
            _add(digest, str(value["StringValue"]).encode("utf-8"))
        else:
            digest.update(bytes([_BINARY]))
            _add(digest, base64.b64decode(value.get("BinaryValue") or ""))
    return digest.hexdigest()


def _add(digest: Any, data: bytes) -> None:
    digest.update(struct.pack(">I", len(data)))
    digest.update(data)
