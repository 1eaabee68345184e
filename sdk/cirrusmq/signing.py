"""Request signing: ``CIRRUS-HMAC-SHA256`` (docs/AUTH-SPEC.md; guide: docs/sdk.md).

Every API request carries three headers::

    X-Cirrus-Date: 20261123T010700Z
    X-Cirrus-Nonce: <16-64 chars of [A-Za-z0-9_-], new for every request>
    Authorization: CIRRUS-HMAC-SHA256 Credential=<access key>, Signature=<64 lowercase hex>

The signature is ``hex(HMAC-SHA256(secret, string_to_sign))`` over these lines, joined by
``"\\n"`` (no trailing newline)::

    CIRRUS-HMAC-SHA256
    <METHOD>
    <path as sent, percent-encoded, without the query>
    <canonical query>
    <X-Cirrus-Date>
    <X-Cirrus-Nonce>
    <lowercase hex SHA-256 of the body bytes>

:func:`sign` signs any request; :class:`CirrusAuth` plugs it into ``httpx`` so that every request
(every retry too) is signed with a fresh date and nonce over the exact bytes sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Generator
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote

import httpx

from .credentials import Credentials

__all__ = [
    "ALGORITHM",
    "AUTHORIZATION_HEADER",
    "DATE_FORMAT",
    "DATE_HEADER",
    "MAX_CLOCK_SKEW_S",
    "NONCE_PATTERN",
    "NONCE_HEADER",
    "CirrusAuth",
    "authorization_header",
    "body_hash",
    "canonical_query",
    "format_date",
    "new_nonce",
    "parse_authorization",
    "sign",
    "signature",
    "string_to_sign",
]

ALGORITHM = "CIRRUS-HMAC-SHA256"
DATE_HEADER = "X-Cirrus-Date"
NONCE_HEADER = "X-Cirrus-Nonce"
AUTHORIZATION_HEADER = "Authorization"
MAX_CLOCK_SKEW_S = 300
"""The service refuses a request whose date is further than this from its clock."""
DATE_FORMAT = "%Y%m%dT%H%M%SZ"
NONCE_PATTERN = re.compile(r"[A-Za-z0-9_-]{16,64}")
"""What the service accepts as a nonce."""
_AUTHORIZATION = re.compile(
    rf"{ALGORITHM} Credential=(?P<key>[^\s,]+), Signature=(?P<signature>[0-9a-f]{{64}})"
)
_UNRESERVED = "-._~"


def format_date(now: datetime | float | None = None) -> str:
    """``now`` (an aware datetime, or seconds since the epoch; default: the clock) as
    ``X-Cirrus-Date``: UTC, ISO 8601 basic, e.g. ``20261123T010700Z``."""
    if now is None:
        moment = datetime.fromtimestamp(time.time(), UTC)
    elif isinstance(now, datetime):
        if now.tzinfo is None:
            raise ValueError("the signing date must be timezone-aware")
        moment = now.astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(now, UTC)
    return moment.strftime(DATE_FORMAT)


def new_nonce() -> str:
    """A fresh nonce: 128 random bits, urlsafe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(16)).rstrip(b"=").decode("ascii")


def _encode(text: str) -> str:
    """RFC 3986 percent-encoding of UTF-8 text: unreserved characters kept, ``%XX`` upper-case."""
    return quote(text, safe=_UNRESERVED)


def canonical_query(query: str | bytes) -> str:
    """The canonical form of a raw query string (without the ``?``).

    Pairs are decoded as a browser or ``httpx`` encodes them (``+`` is a space), then each key
    and value is percent-encoded per RFC 3986, the pairs sorted by key then value and joined
    ``k=v`` with ``&``. A key without ``=`` has an empty value. ``""`` when there is no query.
    """
    if isinstance(query, bytes):
        query = query.decode("ascii", errors="strict")
    pairs = parse_qsl(query, keep_blank_values=True, errors="strict")
    encoded = sorted((_encode(k), _encode(v)) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def body_hash(body: bytes) -> str:
    """Lowercase hex SHA-256 of the raw body bytes (``b""`` when there is no body)."""
    return hashlib.sha256(body).hexdigest()


def string_to_sign(
    method: str, path: str, query: str | bytes, date: str, nonce: str, body: bytes
) -> str:
    """The text the signature covers (see the module docs). ``path`` is as sent on the wire
    (percent-encoded, without the query) and ``query`` the raw query string."""
    return "\n".join(
        [
            ALGORITHM,
            method.upper(),
            path or "/",
            canonical_query(query),
            date,
            nonce,
            body_hash(body),
        ]
    )


def signature(secret_key: str, text: str) -> str:
    """``hex(HMAC-SHA256(secret_key UTF-8, text UTF-8))``, lowercase."""
    return hmac.new(secret_key.encode(), text.encode(), hashlib.sha256).hexdigest()


def authorization_header(access_key: str, signature_hex: str) -> str:
    """The ``Authorization`` header value for a signature."""
    return f"{ALGORITHM} Credential={access_key}, Signature={signature_hex}"


def parse_authorization(value: str) -> tuple[str, str] | None:
    """``(access_key, signature)`` from an ``Authorization`` header, ``None`` if garbled."""
    match = _AUTHORIZATION.fullmatch(value.strip())
    return (match["key"], match["signature"]) if match else None


def _split(url: httpx.URL | str) -> tuple[str, bytes]:
    raw = (url if isinstance(url, httpx.URL) else httpx.URL(url)).raw_path
    path, _, query = raw.partition(b"?")
    return path.decode("ascii"), query


def sign(
    method: str,
    url: httpx.URL | str,
    body: bytes,
    credentials: Credentials,
    *,
    now: datetime | float | None = None,
    nonce: str | None = None,
) -> dict[str, str]:
    """The headers that sign one request: ``X-Cirrus-Date``, ``X-Cirrus-Nonce`` and
    ``Authorization``.

    ``url`` is the full URL (or an ``httpx.URL``) exactly as it will be sent; ``body`` the exact
    body bytes (``b""`` for none). ``now`` and ``nonce`` default to the clock and a new random
    nonce; pass them only to reproduce a signature (tests, test vectors).
    """
    date = format_date(now)
    nonce = new_nonce() if nonce is None else nonce
    if not NONCE_PATTERN.fullmatch(nonce):
        raise ValueError("a nonce is 16 to 64 characters of [A-Za-z0-9_-]")
    path, query = _split(url)
    text = string_to_sign(method, path, query, date, nonce, body)
    return {
        DATE_HEADER: date,
        NONCE_HEADER: nonce,
        AUTHORIZATION_HEADER: authorization_header(
            credentials.access_key, signature(credentials.secret_key, text)
        ),
    }


class CirrusAuth(httpx.Auth):
    """``httpx`` authentication that signs every request (sync and async clients).

    ``httpx`` runs the flow for each request it sends, so each attempt of a retried call gets
    a new date and nonce; the body is read first (``requires_request_body``) so the hash covers
    exactly the bytes on the wire.
    """

    requires_request_body = True

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.clock_offset_s = 0.0
        """The service's clock minus this machine's, learnt from a ``RequestExpired`` answer
        (the transport sets it): dates are signed on the service's clock, e.g. a local
        stack's after ``advance_time``."""

    def _sign(self, request: httpx.Request) -> None:
        try:
            now = time.time() + self.clock_offset_s
            headers = sign(request.method, request.url, request.content, self.credentials, now=now)
        except (ValueError, OverflowError, OSError):
            # an offset whose date cannot be written: sign on this machine's clock again
            self.clock_offset_s = 0.0
            headers = sign(request.method, request.url, request.content, self.credentials)
        request.headers.update(headers)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response]:
        """Sign ``request`` (``httpx`` has read its body: ``requires_request_body``), send it."""
        self._sign(request)
        yield request
