"""The protocol's request signature (pure): ``Authorization: MQ <AccessKeyId>:<Signature>``.

``Signature = base64(HMAC-SHA1(secret, StringToSign))`` where StringToSign is the method, the
Content-MD5 and Content-Type headers as received (empty when absent), the Date header
verbatim, every ``x-mq-*`` header sorted by name (``name:value\\n``) and the request target
exactly as sent (raw path, ``?`` and the raw query string: never rebuilt from decoded
parameters, whose order and encoding the client chose).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime

from .errors import MqHttpError

MAX_SKEW_SECONDS = 15 * 60
"""A request dated further from the service's clock is refused (ApsaraMQ's limit)."""


def string_to_sign(method: str, headers: Mapping[str, str], resource: str) -> str:
    """``headers`` have lower-case names."""
    mq_headers = "".join(
        f"{name}:{headers[name]}\n" for name in sorted(h for h in headers if h.startswith("x-mq-"))
    )
    return "\n".join(
        [
            method.upper(),
            headers.get("content-md5", ""),
            headers.get("content-type", ""),
            headers.get("date", ""),
            mq_headers + resource,
        ]
    )


def signature(secret: str, text: str) -> str:
    digest = hmac.new(secret.encode("utf-8"), text.encode("utf-8"), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def request_target(raw_path: str, raw_query: str) -> str:
    """The request target as the client sent it (API Gateway v2: rawPath, rawQueryString)."""
    return f"{raw_path}?{raw_query}" if raw_query else raw_path


def read_authorization(headers: Mapping[str, str]) -> tuple[str, str]:
    """(access key id, signature) of ``MQ <id>:<signature>``."""
    value = headers.get("authorization")
    if not value:
        raise MqHttpError(401, "MissingAuthorizationHeader", "the Authorization header is missing")
    scheme, _, credential = value.strip().partition(" ")
    access_key, _, given = credential.strip().partition(":")
    if scheme != "MQ" or not access_key or not given:
        raise MqHttpError(
            400,
            "InvalidAuthorizationHeader",
            "Authorization must be 'MQ <AccessKeyId>:<Signature>'",
        )
    return access_key, given


def check_date(headers: Mapping[str, str], clocks_ms: Iterable[int]) -> None:
    """The Date header is an RFC 1123 date within :data:`MAX_SKEW_SECONDS` of one of
    ``clocks_ms``: the service's clock and the host's (the same in a deployment; a local
    stack whose time was advanced keeps accepting clients that sign with the wall clock,
    as this protocol's clients cannot learn another time)."""
    value = headers.get("date")
    if not value:
        raise MqHttpError(403, "MissingDateHeader", "the Date header is missing")
    try:
        signed_at: datetime = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):  # OverflowError: a huge year
        raise MqHttpError(400, "InvalidDateHeader", "Date is not an RFC 1123 date") from None
    if signed_at.tzinfo is None:
        raise MqHttpError(400, "InvalidDateHeader", "Date has no time zone (use GMT)")
    signed_ms = signed_at.timestamp() * 1000
    if all(abs(signed_ms - now) > MAX_SKEW_SECONDS * 1000 for now in clocks_ms):
        raise MqHttpError(
            403,
            "InvalidDateHeader",
            f"Date {value[:64]!r} is more than {MAX_SKEW_SECONDS} s from the service's clock",
        )


def check_content_md5(headers: Mapping[str, str], body: bytes) -> None:
    """A signed ``Content-MD5`` header vouches for the body: the body must be the one it
    names (RFC 1864 base64 of the MD5 digest, or its hex), else the signature, which covers
    only the header, would cover any body. InvalidDigest (400) otherwise."""
    given = headers.get("content-md5")
    if given is None:
        return
    given = given.strip()
    digest = hashlib.md5(body, usedforsecurity=False).digest()
    if given != base64.b64encode(digest).decode("ascii") and given.lower() != digest.hex():
        raise MqHttpError(400, "InvalidDigest", "the body does not match its Content-MD5")


def matches(secret: str, text: str, given: str) -> bool:
    """Whether ``given`` is the signature of ``text``, compared as bytes in constant time
    (``compare_digest`` refuses a str with non-ASCII characters with a TypeError)."""
    expected = signature(secret, text).encode("ascii")
    return hmac.compare_digest(expected, given.encode("utf-8", "surrogatepass"))
