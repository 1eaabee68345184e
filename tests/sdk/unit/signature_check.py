"""The service's signature rules (docs/AUTH-SPEC.md) for the fake services of the unit tests.

The check is built on the SDK's own canonical string (:func:`cirrusmq.signing.string_to_sign`),
which the published test vectors pin down, so a unit test that goes through a fake proves that
the SDK signs what it sends, end to end.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
from cirrusmq import Credentials
from cirrusmq.signing import (
    DATE_FORMAT,
    MAX_CLOCK_SKEW_S,
    NONCE_PATTERN,
    parse_authorization,
    signature,
    string_to_sign,
)

FAKE_CREDENTIALS = Credentials("CMQFAKEFAKEFAKEFAKEF", "fake-secret-for-unit-tests")
NONCE_TTL_S = 600


def _refuse(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": message})


class SignatureChecker:
    """Checks requests as the service does; ``check`` returns the refusal, or ``None``."""

    def __init__(
        self,
        credentials: Credentials | None = FAKE_CREDENTIALS,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = {credentials.access_key: credentials.secret_key} if credentials else {}
        self.clock = clock
        self.nonces: list[str] = []
        """The nonce of every request that passed, in order."""
        self.refusals: list[str] = []
        """The code of every refusal, in order."""
        self._seen: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def check(self, request: httpx.Request) -> httpx.Response | None:
        refusal = self._check(request)
        if refusal is not None:
            with self._lock:
                self.refusals.append(refusal.json()["code"])
        return refusal

    def _check(self, request: httpx.Request) -> httpx.Response | None:
        header = request.headers.get("authorization")
        date = request.headers.get("x-cirrus-date")
        nonce = request.headers.get("x-cirrus-nonce")
        parsed = parse_authorization(header) if header else None
        if parsed is None or not date or not nonce or not NONCE_PATTERN.fullmatch(nonce):
            return _refuse(401, "MissingSignature", "the request is not signed")
        try:
            when = datetime.strptime(date, DATE_FORMAT).replace(tzinfo=UTC).timestamp()
        except ValueError:
            return _refuse(401, "MissingSignature", "malformed X-Cirrus-Date")
        access_key, given = parsed
        secret = self.keys.get(access_key)
        path, _, query = request.url.raw_path.partition(b"?")
        text = string_to_sign(request.method, path.decode(), query, date, nonce, request.content)
        if secret is None or not hmac.compare_digest(given, signature(secret, text)):
            return _refuse(401, "InvalidSignature", "the signature does not match")
        now = self.clock()
        if abs(now - when) > MAX_CLOCK_SKEW_S:
            return _refuse(401, "RequestExpired", "the request's date is too far from now")
        with self._lock:
            seen = self._seen.get((access_key, nonce))
            if seen is not None and now - seen < NONCE_TTL_S:
                return _refuse(401, "ReplayedRequest", "this nonce was used before")
            self._seen[(access_key, nonce)] = now
            self.nonces.append(nonce)
        if request.content and not request.headers.get("content-type", "").startswith(
            "application/json"
        ):
            return _refuse(415, "UnsupportedMediaType", "bodies are application/json")
        return None
