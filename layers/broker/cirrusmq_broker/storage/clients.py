"""Lazily created, shared boto3 clients (never at import time).

Every client translates the AWS answers a caller may simply retry into the broker's
retriable errors, raised ``from`` the AWS error after botocore's own retries: throttling
becomes :class:`Throttled` (429), AWS faults and connection failures
:class:`StorageUnavailable` (503 ``Busy``), and a write refused because a transaction held
its item (TransactionConflict) or a TransactWriteItems cancelled only because of concurrent
writes or throttling (no condition failed) :class:`StorageContended` (503 ``Busy`` unless
the store re-reads and retries), whichever store ran it. Every other ClientError
(ConditionalCheckFailed, a transaction cancelled with a failed condition,
PreconditionFailed, NoSuchKey, ...) reaches the stores unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError, IncompleteReadError
from botocore.exceptions import ConnectionError as AwsConnectionError
from botocore.response import StreamingBody

from ..errors import BrokerError, StorageContended, StorageUnavailable, Throttled
from ..settings import Settings

CallObserver = Callable[[str, str, dict[str, Any]], None]
"""Called with (service, operation, request params) before every AWS call (benchmarks)."""

THROTTLING_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "SlowDown",
    }
)
"""AWS error codes meaning "too many requests": the caller gets 429 Throttled."""

UNAVAILABLE_CODES = frozenset(
    {
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "ConditionalRequestConflict",
        "OperationAborted",
    }
)
"""AWS error codes of a transient fault or conflict: the caller gets 503 Busy."""

RETRIABLE_STATUSES = frozenset({500, 502, 503, 504})
"""AWS answers with these statuses are faults whatever their code: 503 Busy."""

CONTENDED_REASONS = frozenset(
    {"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"}
)
"""Cancellation reasons of a transaction that wrote nothing only because of other writes
or throttling: sent again, it may succeed (503 Busy)."""

_lock = threading.Lock()
_clients: dict[tuple[str, str | None, str | None, str], Any] = {}
_observers: list[CallObserver] = []
_config = Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=64)
QUICK_CONFIG = Config(
    connect_timeout=1,
    read_timeout=2,
    retries={"total_max_attempts": 1, "mode": "standard"},
    max_pool_connections=8,
)
"""For a best-effort call made inline on a request's path (the scheduler wake): one
attempt of at most ~3 s, so it can never hold the request near its API timeout."""


def _endpoint_arguments(settings: Settings) -> dict[str, Any]:
    """A client's endpoint and credentials for the settings' endpoint (the local stack's moto
    server, which accepts any credentials); none on AWS."""
    if not settings.aws_endpoint_url:
        return {}
    return {
        "endpoint_url": settings.aws_endpoint_url,
        "aws_access_key_id": "cirrusmq-local",
        "aws_secret_access_key": "cirrusmq-local",
    }


def aws_client(service: str, settings: Settings, *, quick: bool = False) -> Any:
    """A boto3 client for ``service`` at the settings' endpoint, created once per process
    (``quick``: a separate one with :data:`QUICK_CONFIG`)."""
    key = (service, settings.aws_endpoint_url, settings.aws_region, "quick" if quick else "")
    with _lock:
        client = _clients.get(key)
        if client is None:
            extra = _endpoint_arguments(settings)
            client = boto3.session.Session().client(
                service,
                region_name=settings.aws_region or "us-east-1",
                config=QUICK_CONFIG if quick else _config,
                **extra,
            )
            translate_retriable_errors(client)
            client.meta.events.register("before-parameter-build.*.*", _notify)
            _clients[key] = client
        return client


def presigning_client(settings: Settings) -> Any:
    """An S3 client that presigns URLs with Signature Version 4 (which S3 requires of new
    buckets and regions); it makes no calls itself."""
    key = ("s3", settings.aws_endpoint_url, settings.aws_region, "presign")
    with _lock:
        client = _clients.get(key)
        if client is None:
            extra = _endpoint_arguments(settings)
            client = boto3.session.Session().client(
                "s3",
                region_name=settings.aws_region or "us-east-1",
                config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
                **extra,
            )
            _clients[key] = client
        return client


def translate_retriable_errors(client: Any) -> None:
    """Make ``client`` raise Throttled / StorageUnavailable for AWS answers a caller may retry."""
    client.meta.events.register("after-call.*.*", _after_call)
    client.meta.events.register("after-call-error.*.*", _after_call_error)


def retriable_error(code: str, status: int) -> type[BrokerError] | None:
    """The broker error for an AWS error ``code`` answered with HTTP ``status``, if retriable."""
    if code in THROTTLING_CODES or status == 429:
        return Throttled
    if code in UNAVAILABLE_CODES or status in RETRIABLE_STATUSES:
        return StorageUnavailable
    return None


def contended(parsed: dict[str, Any]) -> bool:
    """Whether a cancelled transaction's reasons are only conflicts / throttling ('None'
    for the items that were fine): no condition failed, nothing invalid."""
    codes = _reason_codes(parsed)
    return bool(codes & CONTENDED_REASONS) and codes <= CONTENDED_REASONS | {"None"}


def _reason_codes(parsed: dict[str, Any]) -> set[str]:
    return {str(r.get("Code", "None")) for r in parsed.get("CancellationReasons") or []}


def observe_calls(observer: CallObserver) -> Callable[[], None]:
    """Register an observer of every AWS call; returns a function that removes it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)


def _notify(model: Any, params: dict[str, Any], **_: Any) -> None:
    for observer in list(_observers):
        observer(model.service_model.service_name, model.name, params)


def _after_call(
    http_response: Any, parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
) -> None:
    """Runs after botocore's retries, before it raises a ClientError for status >= 300."""
    status = getattr(http_response, "status_code", 200)
    if status < 300:
        if isinstance(parsed.get("Body"), StreamingBody):
            parsed["Body"] = _TranslatedBody(parsed["Body"], _where(model))
        return
    code = str(context.get("error_code_override") or parsed.get("Error", {}).get("Code", ""))
    if code == "TransactionConflictException":  # a transaction held the item: not written
        raise StorageContended(
            f"storage is busy ({_where(model)}: {code}); retry shortly"
        ) from ClientError(parsed, model.name)
    if code == "TransactionCanceledException" and contended(parsed):
        reasons = ", ".join(sorted(_reason_codes(parsed) - {"None"}))
        raise StorageContended(
            f"storage is busy ({_where(model)} cancelled: {reasons}); retry shortly"
        ) from ClientError(parsed, model.name)
    error = retriable_error(code, status)
    if error is None:
        return
    state = "throttled" if error is Throttled else "unavailable"
    message = f"storage is {state} ({_where(model)}: {code or status}); retry shortly"
    raise error(message) from ClientError(parsed, model.name)


def _after_call_error(exception: Exception, context: dict[str, Any], **_: Any) -> None:
    """Runs when a call failed without an answer (after botocore's retries)."""
    if isinstance(exception, AwsConnectionError | HTTPClientError):
        raise StorageUnavailable(
            f"storage is unreachable ({type(exception).__name__}); retry shortly"
        ) from exception


def _where(model: Any) -> str:
    return f"{model.service_model.service_id} {model.name}"


_STREAM_FAILURES = (AwsConnectionError, HTTPClientError, IncompleteReadError)
"""A body read cut short: ReadTimeoutError, ResponseStreamingError, ... (HTTPClientError)."""


class _TranslatedBody:
    """A response body whose read raises StorageUnavailable if the connection fails mid-way."""

    def __init__(self, body: StreamingBody, where: str) -> None:
        self._body = body
        self._where = where

    def read(self, amt: int | None = None) -> bytes:
        try:
            return self._body.read(amt)
        except _STREAM_FAILURES as exc:
            raise StorageUnavailable(
                f"storage read failed ({self._where}: {type(exc).__name__}); retry"
            ) from exc

    def __getattr__(self, name: str) -> Any:
        return getattr(self._body, name)
