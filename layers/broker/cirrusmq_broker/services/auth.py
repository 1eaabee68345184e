"""Request authentication: verifies ``CIRRUS-HMAC-SHA256`` signatures (docs/AUTH-SPEC.md).

One :class:`Authenticator` per process checks, in order: the three headers are there and
well-formed (else ``MissingSignature``), the date is within 300 s of the broker clock
(``RequestExpired``, with the broker's time in ``server_time``: on a local stack whose time
was advanced, clients sign with the stack's time, which the SDK learns from that answer),
the key exists, is active
and the signature matches (``InvalidSignature``, one code and one message for all of
these). :meth:`Authenticator.claim` then records the nonce (``ReplayedRequest`` if the key
used it before): the API claims it before the first change a replay of the request would
repeat, and not at all for requests a replay cannot change anything with (reads, acks,
stamped sends; docs/AUTH-SPEC.md). Keys are cached (secret,
permissions, status) for at most ``cache_seconds`` per process, so a disabled key stops
working within that time elsewhere (at once in the process that disabled it).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote

from ..errors import (
    AccessDenied,
    InvalidSignature,
    MissingSignature,
    ReplayedRequest,
    RequestExpired,
)
from ..rules.permissions import Permissions
from ..storage.access_keys import ACTIVE, AccessKeyStore, SecretCipher
from ..storage.nonces import NonceStore

ALGORITHM = "CIRRUS-HMAC-SHA256"
DATE_HEADER = "x-cirrus-date"
NONCE_HEADER = "x-cirrus-nonce"
MAX_SKEW_SECONDS = 300
NONCE_TTL_SECONDS = 600
CACHE_SECONDS = 60
CACHE_SIZE = 1024

_AUTHORIZATION = re.compile(
    rf"{ALGORITHM}\s+Credential=(?P<key>[A-Za-z0-9_-]{{1,128}})\s*,\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})"
)
_DATE = re.compile(r"\d{8}T\d{6}Z")
_NONCE = re.compile(r"[A-Za-z0-9_-]{16,64}")
_MISMATCH = "the request signature does not match"


@dataclass(frozen=True)
class SignedRequest:
    """What the signature covers, as received."""

    method: str
    path: str
    """As sent on the wire: percent-encoded, without the query."""
    raw_query: str
    headers: Mapping[str, str]
    """Header names in lower case."""
    body: bytes


@dataclass(frozen=True)
class Principal:
    """An authenticated access key and what it may do."""

    access_key: str
    permissions: Permissions
    nonce: str = field(default="", compare=False)
    """Of the request it signed (claimed by :meth:`Authenticator.claim`)."""

    def require(self, allowed: bool, action: str) -> None:
        """Raise AccessDenied naming ``action`` (e.g. "publish to topic orders") unless
        ``allowed``."""
        if not allowed:
            raise AccessDenied(f"access denied: this access key may not {action}")


def canonical_query(raw_query: str) -> str:
    """Pairs decoded (``+`` is a space), each key and value percent-encoded per RFC 3986,
    sorted by key then value, joined ``k=v`` with ``&``."""
    pairs = parse_qsl(raw_query, keep_blank_values=True)
    encoded = sorted((quote(k, safe="-._~"), quote(v, safe="-._~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def string_to_sign(request: SignedRequest, date: str, nonce: str) -> str:
    return "\n".join(
        [
            ALGORITHM,
            request.method.upper(),
            request.path,
            canonical_query(request.raw_query),
            date,
            nonce,
            hashlib.sha256(request.body).hexdigest(),
        ]
    )


def sign(secret: str, text: str) -> str:
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class _CachedKey:
    loaded_ms: int
    secret: str | None = field(repr=False)
    permissions: Permissions
    active: bool


class Authenticator:
    """Verifies signed requests against the access keys."""

    def __init__(
        self,
        *,
        keys: AccessKeyStore,
        cipher: SecretCipher,
        nonces: NonceStore,
        clock: Callable[[], int],
        cache_seconds: int = CACHE_SECONDS,
    ) -> None:
        """Dates are checked against ``clock`` alone, the clock the nonces expire on: a date
        is accepted exactly while its nonce is remembered (``NONCE_TTL_SECONDS`` >= twice
        the skew). A local stack whose time was advanced refuses wall-clock dates with its
        time in ``server_time``; the SDK signs with that time from then on."""
        self._keys = keys
        self._cipher = cipher
        self._nonces = nonces
        self._clock = clock
        self._cache_ms = cache_seconds * 1000
        self._cache: dict[str, _CachedKey] = {}
        self._secrets: dict[tuple[str, bytes], str] = {}
        self._lock = threading.Lock()

    def authenticate(
        self, request: SignedRequest, *, fresh: bool = False, claim: bool = True
    ) -> Principal:
        """The principal that signed ``request``; raises a 401 error otherwise.

        ``fresh`` reads the key's status and permissions again instead of trusting this
        process's cache (the keys API: a key disabled elsewhere cannot act on keys).
        ``claim=False`` leaves the nonce unrecorded: the caller claims it (:meth:`claim`)
        before the request changes anything a replay would change again.
        """
        access_key, signature, date, nonce = _read_headers(request.headers)
        now = self._clock()
        signed_at = datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()
        if abs(now - signed_at * 1000) > MAX_SKEW_SECONDS * 1000:
            raise RequestExpired(
                f"the request date {date} is more than {MAX_SKEW_SECONDS} s from the service's"
                f" clock ({_format(now)}); sign it again with the service's time",
                details={"server_time": now},
            )
        if fresh:
            self.forget(access_key)
        key = self._key(access_key, now)
        expected = sign(key.secret, string_to_sign(request, date, nonce)) if key else "0" * 64
        if not hmac.compare_digest(expected, signature) or key is None:
            raise InvalidSignature(_MISMATCH)
        principal = Principal(access_key, key.permissions, nonce)
        if claim:
            self.claim(principal)
        return principal

    def authenticate_with(self, access_key: str, matches: Callable[[str], bool]) -> Principal:
        """The principal of ``access_key`` if ``matches(secret)`` holds: for protocols that
        sign with another scheme (the RocketMQ HTTP adapter's HMAC-SHA1), which check their
        own dates. InvalidSignature for an unknown, disabled key or a mismatch."""
        found = self.signing_key(access_key)
        if found is None or not matches(found[0]):
            raise InvalidSignature(_MISMATCH)
        return Principal(access_key, found[1])

    def signing_key(self, access_key: str) -> tuple[str, Permissions] | None:
        """The secret and permissions of an active key (None: unknown, disabled), for a
        protocol adapter that verifies another signature scheme with the same keys (SigV4
        in the SQS adapter); cached like :meth:`authenticate`'s look-ups."""
        key = self._key(access_key, self._clock())
        if key is None or key.secret is None:
            return None
        return key.secret, key.permissions

    def permissions_of(self, access_key: str) -> Permissions | None:
        """The permissions of an active key (cached as for requests), or None if the key is
        unknown, disabled or deleted: a connection signed earlier acts with them."""
        key = self._key(access_key, self._clock())
        return key.permissions if key is not None else None

    def claim(self, principal: Principal) -> None:
        """Record the nonce of the principal's request (one conditional put); raise
        ``ReplayedRequest`` if the key used it within the last ``NONCE_TTL_SECONDS``."""
        now_s = self._clock() // 1000
        if not self._nonces.remember(
            principal.access_key, principal.nonce, now_s=now_s, expires_at=now_s + NONCE_TTL_SECONDS
        ):
            raise ReplayedRequest("this request was seen before: sign each request anew")

    def _secret(self, access_key: str, ciphertext: bytes) -> str | None:
        """The decrypted secret; a secret never changes, so it is decrypted once per
        container (status and permissions are what the short cache re-reads)."""
        cache_key = (access_key, bytes(ciphertext))
        with self._lock:
            if cache_key in self._secrets:
                return self._secrets[cache_key]
        secret = self._cipher.decrypt(access_key, ciphertext)
        with self._lock:
            if len(self._secrets) >= CACHE_SIZE:
                self._secrets.pop(next(iter(self._secrets)))
            if secret is not None:
                self._secrets[cache_key] = secret
        return secret

    def forget(self, access_key: str) -> None:
        """Drop a cached key (it was disabled, enabled or deleted in this process)."""
        with self._lock:
            self._cache.pop(access_key, None)

    def _key(self, access_key: str, now: int) -> _CachedKey | None:
        """The active key with its secret, or None (unknown, disabled, undecryptable)."""
        with self._lock:
            cached = self._cache.get(access_key)
        if cached is None or not 0 <= now - cached.loaded_ms < self._cache_ms:
            record = self._keys.get(access_key)
            if record is None:
                self.forget(access_key)
                return None
            active = record.status == ACTIVE
            secret = self._secret(access_key, record.secret_ciphertext) if active else None
            cached = _CachedKey(now, secret, record.permissions, active)
            with self._lock:
                if len(self._cache) >= CACHE_SIZE:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[access_key] = cached
        return cached if cached.active and cached.secret is not None else None


def _read_headers(headers: Mapping[str, str]) -> tuple[str, str, str, str]:
    authorization = headers.get("authorization") or ""
    match = _AUTHORIZATION.fullmatch(authorization.strip())
    if match is None:
        raise MissingSignature(
            "sign the request: Authorization: CIRRUS-HMAC-SHA256 Credential=<access key>, "
            "Signature=<64 hex>"
        )
    date = (headers.get(DATE_HEADER) or "").strip()
    if not _DATE.fullmatch(date) or not _valid_date(date):
        raise MissingSignature("X-Cirrus-Date is missing or not like 20261123T010700Z (UTC)")
    nonce = (headers.get(NONCE_HEADER) or "").strip()
    if not _NONCE.fullmatch(nonce):
        raise MissingSignature("X-Cirrus-Nonce is missing or not 16-64 of [A-Za-z0-9_-]")
    return match["key"], match["signature"], date, nonce


def _format(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y%m%dT%H%M%SZ")


def _valid_date(date: str) -> bool:
    try:
        datetime.strptime(date, "%Y%m%dT%H%M%SZ")
    except ValueError:
        return False
    return True
