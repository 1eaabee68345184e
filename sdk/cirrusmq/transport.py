"""HTTP plumbing shared by every client: base URL, JSON, error mapping, retries.

:class:`Transport` (threads) and :class:`AsyncTransport` (asyncio) wrap one ``httpx`` client
each. A call is retried with exponential backoff and jitter on transport errors, 429 and 5xx
only (:class:`RetryPolicy`); every other error is raised at once as its typed
:class:`~cirrusmq.errors.MQError` — except a 401 ``RequestExpired``,
which is sent once more at once (a refused request did nothing), signed from then on with the
service's clock as the refusal gave it (``server_time``: any offset from a loopback endpoint,
the local stack; elsewhere within the 300 s skew window only).

Every call carries an ``X-Cirrus-Correlation-Id`` header (the caller's, else a new one per
call, the same on its retries): the service logs it with the request and echoes it; a failed
call's error carries it (``MQError.correlation_id``) and is logged with it (logger
``cirrusmq.transport``: WARNING for faults, DEBUG for refusals). The header is not signed.

With credentials, every request is signed (:class:`~cirrusmq.signing.CirrusAuth`): each attempt
gets its own date and nonce, and the signature covers exactly the body bytes sent. Bodies are
always sent as ``application/json``, and query strings are percent-encoded per RFC 3986 (a space
is ``%20``, never ``+``), as the signature's canonical query has it.

The module is over 400 lines because the threaded and asyncio transports sit side by side:
they share the retry policy, the error mapping and the clock adoption, and a change to one
must be seen next to the other.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx

from .credentials import Credentials
from .errors import AuthenticationError, MQError, TransportError, error_from_response
from .signing import CirrusAuth

__all__ = [
    "CORRELATION_HEADER",
    "AsyncTransport",
    "RetryPolicy",
    "Transport",
    "should_resign",
    "should_retry",
]

log = logging.getLogger(__name__)
CORRELATION_HEADER = "X-Cirrus-Correlation-Id"

USER_AGENT = "cirrusmq-python/0.1.0"
DEFAULT_REQUEST_TIMEOUT_S = 10.0
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
"""Failures that prove the request never reached the service (safe to repeat anything)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a call is repeated after a retriable failure."""

    max_attempts: int = 3
    """Attempts in all, the first included (1 = no retry)."""
    initial_backoff_ms: float = 100
    """The wait before the first retry (before jitter)."""
    max_backoff_ms: float = 5_000
    """The longest wait between two attempts."""
    multiplier: float = 2.0
    """Growth of the wait from one retry to the next."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def backoff_s(self, retry: int, *, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based): "equal jitter" backoff."""
        ceiling = min(self.max_backoff_ms, self.initial_backoff_ms * self.multiplier ** (retry - 1))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s * 1000, self.max_backoff_ms))
        return delay / 1000


def should_retry(error: MQError, *, idempotent: bool) -> bool:
    """Whether ``error`` may be retried; a non-idempotent call only if it surely did nothing."""
    if not error.retriable:
        return False
    if idempotent:
        return True
    if isinstance(error, TransportError):
        return isinstance(error.__cause__, _NOT_SENT)
    return error.http_status in (429, 503)


def should_resign(error: MQError) -> bool:
    """Whether ``error`` is a refused signature that a fresh date and nonce may cure (once)."""
    return isinstance(error, AuthenticationError) and error.resignable


MAX_REMOTE_CLOCK_OFFSET_S = 300
"""The largest service clock offset adopted from a non-loopback endpoint: the signature's skew
window. A ``RequestExpired`` answer is not authenticated, so a larger offset from anywhere but
the local stack would let whoever answers obtain requests dated when it likes (replayable at
the real service then)."""

_SANE_SERVER_MS = (946_684_800_000, 4_102_444_800_000)  # 2000-01-01 .. 2100-01-01, in ms


def _is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine (127.0.0.0/8, ``::1``, ``localhost``)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def service_clock_offset_s(error: MQError, host: str) -> float | None:
    """The service's clock minus this machine's, as a ``RequestExpired`` answer's
    ``server_time`` states it, if it may be adopted: an integer (ms) within a sane range
    (2000 to 2100); any offset from a loopback endpoint (the local stack, whose
    ``advance_time`` moves its clock), elsewhere at most :data:`MAX_REMOTE_CLOCK_OFFSET_S`.
    Never from a ``Date`` header (a proxy's, maybe)."""
    server_ms = error.details.get("server_time")
    if not isinstance(server_ms, int) or isinstance(server_ms, bool):
        return None
    if not _SANE_SERVER_MS[0] <= server_ms <= _SANE_SERVER_MS[1]:
        return None
    offset = server_ms / 1000 - time.time()
    if abs(offset) > MAX_REMOTE_CLOCK_OFFSET_S and not _is_loopback(host):
        return None
    return offset


def _follow_service_clock(client: httpx.Client | httpx.AsyncClient, error: MQError) -> None:
    """Sign from now on with the service's clock, as a ``RequestExpired`` answer states it
    (``server_time``: a machine whose clock is off, a local stack whose time was advanced),
    within the bounds of :func:`service_clock_offset_s`; otherwise the error's hint only."""
    auth = client.auth
    if isinstance(auth, CirrusAuth) and isinstance(error, AuthenticationError):
        offset = service_clock_offset_s(error, client.base_url.host)
        if offset is not None:
            auth.clock_offset_s = offset


def _retry_after(error: MQError) -> float | None:
    value = error.details.get("retry_after_s") if error.http_status == 429 else None
    return float(value) if isinstance(value, int | float) else None


def _decode(response: httpx.Response) -> Any:
    """The JSON body of a successful response, or the typed error of a failed one."""
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            if response.is_success:
                raise TransportError(
                    f"malformed JSON in a {response.status_code} response"
                ) from None
    if response.is_success:
        return body
    error = error_from_response(response.status_code, body)
    if error.code == "RequestExpired":
        skew = _clock_skew_s(response, error)
        if skew is not None:
            error.details = {**error.details, "clock_skew_s": skew}
            error.message += f"; this machine's clock seems {abs(skew):.0f} s " + (
                "ahead" if skew > 0 else "behind"
            )
            error.args = (error.message,)
    retry_after = response.headers.get("retry-after")
    if retry_after is not None and re.fullmatch(r"[0-9]{1,9}", retry_after):
        error.details = {**error.details, "retry_after_s": int(retry_after)}
    return _Raise(error)


def _clock_skew_s(response: httpx.Response, error: MQError) -> float | None:
    """This machine's clock minus the service's (from the error's ``server_time``, else the
    response's ``Date``), if known."""
    server_ms = error.details.get("server_time")
    if isinstance(server_ms, int) and not isinstance(server_ms, bool):
        return round(time.time() - server_ms / 1000, 1)
    header = response.headers.get("date")
    if not header:
        return None
    try:
        server = parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return round(time.time() - server, 1)


@dataclass(frozen=True)
class _Raise:
    error: MQError


def _transport_error(exc: httpx.HTTPError, method: str, endpoint: str, path: str) -> TransportError:
    """The error of a call without a usable response; it names the endpoint (in
    ``details["endpoint"]`` too), so a wrong or stopped endpoint is recognised at once."""
    detail = f"{type(exc).__name__}: {exc or 'no response'}"
    if isinstance(exc, _NOT_SENT):
        message = f"cannot connect to {endpoint} ({method} {path}: {detail})"
    else:
        message = f"{method} {endpoint}{path}: {detail}"
    return TransportError(message, details={"endpoint": endpoint})


def _encode(json_body: Any, content: bytes | None) -> tuple[bytes | None, dict[str, str]]:
    if content is None and json_body is None:
        return None, {}
    if content is None:
        content = json.dumps(json_body, separators=(",", ":")).encode()
    return content, {"content-type": "application/json"}


def _correlated(headers: dict[str, str], correlation_id: str | None) -> tuple[dict[str, str], str]:
    """``headers`` with the call's correlation id (``correlation_id``, else a new one)."""
    correlation = correlation_id or uuid.uuid4().hex
    return {**headers, CORRELATION_HEADER: correlation}, correlation


def _log_failure(error: MQError, method: str, path: str, correlation: str) -> None:
    error.correlation_id = correlation
    fault = error.http_status is None or error.http_status >= 500
    log.log(
        logging.WARNING if fault else logging.DEBUG,
        "%s %s failed (correlation id %s): %s",
        method,
        path,
        correlation,
        error,
    )


def _with_query(path: str, params: Mapping[str, str] | None) -> str:
    """``path`` with ``params`` as an RFC 3986 query (``%20`` for a space, never ``+``)."""
    if not params:
        return path
    query = "&".join(
        f"{quote(str(k), safe='-._~')}={quote(str(v), safe='-._~')}" for k, v in params.items()
    )
    return f"{path}{'&' if '?' in path else '?'}{query}"


def _client_options(
    endpoint: str,
    credentials: Credentials | None,
    request_timeout_s: float,
    event_hooks: Mapping[str, list[Callable]] | None,
) -> dict[str, Any]:
    return {
        "base_url": endpoint.rstrip("/"),
        "timeout": httpx.Timeout(request_timeout_s),
        "headers": {"user-agent": USER_AGENT, "accept": "application/json"},
        "event_hooks": dict(event_hooks or {}),
        "auth": CirrusAuth(credentials) if credentials is not None else None,
    }


class Transport:
    """A blocking HTTP client for the CirrusMQ API (thread-safe).

    ``event_hooks`` and ``http_transport`` are handed to ``httpx`` (instrumentation, proxies,
    tests). Pass one ``Transport`` to several clients to share its connection pool.
    """

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
        http_transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials
        """Every request is signed with them (``None``: requests go unsigned)."""
        self.request_timeout_s = request_timeout_s
        self.retry = retry or RetryPolicy()
        self._client = httpx.Client(
            **_client_options(endpoint, credentials, request_timeout_s, event_hooks),
            transport=http_transport,
        )
        self._closed = threading.Event()

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy | None = None,
        idempotent: bool = True,
        interrupt: threading.Event | None = None,
        correlation_id: str | None = None,
    ) -> Any:
        """Make the call, retrying as the policy allows; the decoded JSON body or ``None``.

        ``interrupt`` cuts a backoff wait short (the last error is raised then); without it,
        :meth:`close` does. ``correlation_id``: the call's (default: a new one).
        """
        policy = retry or self.retry
        body, headers = _encode(json_body, content)
        headers, correlation = _correlated(headers, correlation_id)
        target = _with_query(path, params)
        attempt, resigned = 1, False
        while True:
            try:
                return self._once(method, target, body, headers, timeout_s)
            except MQError as error:
                if not resigned and should_resign(error):
                    resigned = True  # signed anew by the next attempt; not counted
                    _follow_service_clock(self._client, error)
                    continue
                if (
                    attempt >= policy.max_attempts
                    or not should_retry(error, idempotent=idempotent)
                    or (interrupt or self._closed).wait(
                        policy.backoff_s(attempt, retry_after_s=_retry_after(error))
                    )
                ):
                    _log_failure(error, method, path, correlation)
                    raise
                attempt += 1

    def _once(
        self,
        method: str,
        path: str,
        body: bytes | None,
        headers: dict[str, str],
        timeout_s: float | None,
    ) -> Any:
        timeout = httpx.Timeout(timeout_s) if timeout_s is not None else httpx.USE_CLIENT_DEFAULT
        try:
            response = self._client.request(
                method, path, content=body, headers=headers, timeout=timeout
            )
        except httpx.HTTPError as exc:
            raise _transport_error(exc, method, self.endpoint, path) from exc
        except RuntimeError as exc:  # the client was closed under us
            raise TransportError(f"{method} {self.endpoint}{path}: {exc}") from exc
        result = _decode(response)
        if isinstance(result, _Raise):
            raise result.error
        return result

    def close(self) -> None:
        """Close the connection pool (idempotent); pending backoff waits end at once."""
        self._closed.set()
        self._client.close()


async def _interrupted(interrupt: asyncio.Event | None, delay_s: float) -> bool:
    """Wait ``delay_s``; True if ``interrupt`` was set meanwhile (or before)."""
    if interrupt is None:
        await asyncio.sleep(delay_s)
        return False
    try:
        await asyncio.wait_for(interrupt.wait(), delay_s)
    except TimeoutError:
        return False
    return True


class AsyncTransport:
    """The asyncio counterpart of :class:`Transport`."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
        http_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials
        """Every request is signed with them (``None``: requests go unsigned)."""
        self.request_timeout_s = request_timeout_s
        self.retry = retry or RetryPolicy()
        self._client = httpx.AsyncClient(
            **_client_options(endpoint, credentials, request_timeout_s, event_hooks),
            transport=http_transport,
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        retry: RetryPolicy | None = None,
        idempotent: bool = True,
        interrupt: asyncio.Event | None = None,
        correlation_id: str | None = None,
    ) -> Any:
        """Make the call, retrying as the policy allows; the decoded JSON body or ``None``.

        ``interrupt`` cuts a backoff wait short (the last error is raised then).
        ``correlation_id``: the call's (default: a new one).
        """
        policy = retry or self.retry
        body, headers = _encode(json_body, content)
        headers, correlation = _correlated(headers, correlation_id)
        target = _with_query(path, params)
        timeout = httpx.Timeout(timeout_s) if timeout_s is not None else httpx.USE_CLIENT_DEFAULT
        attempt, resigned = 1, False
        while True:
            try:
                try:
                    response = await self._client.request(
                        method, target, content=body, headers=headers, timeout=timeout
                    )
                except httpx.HTTPError as exc:
                    raise _transport_error(exc, method, self.endpoint, path) from exc
                except RuntimeError as exc:
                    raise TransportError(f"{method} {self.endpoint}{path}: {exc}") from exc
                result = _decode(response)
                if isinstance(result, _Raise):
                    raise result.error
                return result
            except MQError as error:
                if not resigned and should_resign(error):
                    resigned = True
                    _follow_service_clock(self._client, error)
                    continue
                if (
                    attempt >= policy.max_attempts
                    or not should_retry(error, idempotent=idempotent)
                    or await _interrupted(
                        interrupt, policy.backoff_s(attempt, retry_after_s=_retry_after(error))
                    )
                ):
                    _log_failure(error, method, path, correlation)
                    raise
                attempt += 1

    async def close(self) -> None:
        """Close the connection pool (idempotent)."""
        await self._client.aclose()
