"""The SDK's errors: one root, :class:`MQError`, and one subclass per kind of failure.

Every error carries the server's stable ``code`` (``None`` when the failure happened on this
side), the HTTP ``http_status`` (``None`` when no response arrived) and whether the call may
be ``retriable``. Responses are mapped to these classes in one place: :func:`error_from_response`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = [
    "AccessDeniedError",
    "AuthenticationError",
    "BadRequestError",
    "ClientClosedError",
    "ConflictError",
    "ForbiddenError",
    "MQError",
    "MessageKeptError",
    "NotFoundError",
    "OutboxError",
    "OutboxFullError",
    "OutboxLockedError",
    "PayloadTooLargeError",
    "ProducerFencedError",
    "ReceiptHandleExpiredError",
    "ServerError",
    "SubscriptionConflictError",
    "ThrottledError",
    "TransactionEndedError",
    "TransportError",
    "UnauthorizedError",
    "UnsupportedFeatureError",
    "error_from_response",
    "InvalidLargeBodyError",
    "LargeBodyError",
]


class MQError(Exception):
    """Root of every error the SDK raises."""

    default_retriable: ClassVar[bool] = False

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        http_status: int | None = None,
        details: Mapping[str, Any] | None = None,
        retriable: bool | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        """The server's stable error code, e.g. ``TopicNotFound``."""
        self.http_status = http_status
        """The HTTP status of the response, ``None`` when there was none."""
        self.details: Mapping[str, Any] = dict(details or {})
        """Extra fields the server sent along (e.g. ``receipt_handles``)."""
        self.retriable = self.default_retriable if retriable is None else retriable
        """Whether the same call may succeed if made again."""
        self.correlation_id: str | None = None
        """The call's ``X-Cirrus-Correlation-Id``: the service logs it with the request."""

    def __str__(self) -> str:
        prefix = f"[{self.code}] " if self.code else ""
        return f"{prefix}{self.message}"


class BadRequestError(MQError):
    """400 (or another 4xx without its own class): the request was refused, nothing changed."""


class ReceiptHandleExpiredError(BadRequestError):
    """Stale receipt handles (the message was redelivered since); see ``receipt_handles``."""

    @property
    def receipt_handles(self) -> list[str]:
        """The offending handles, as listed by the server."""
        return list(self.details.get("receipt_handles", ()))


class UnauthorizedError(MQError):
    """401: missing or invalid credentials (raised as :class:`AuthenticationError`)."""


class AuthenticationError(UnauthorizedError):
    """401: the service did not accept the request's signature; ``code`` says why.

    - ``MissingSignature``: no (or a garbled) ``Authorization``, date or nonce header — the
      client has no credentials, or something between it and the service stripped them;
    - ``InvalidSignature``: unknown, disabled or deleted access key, or a wrong secret (the
      service does not say which);
    - ``RequestExpired``: the request's date is more than 300 s off the service's clock —
      check this machine's clock (``details["clock_skew_s"]`` estimates the offset when the
      response had a ``Date`` header);
    - ``ReplayedRequest``: the nonce was used before.

    Not retriable: the transport re-sends a ``RequestExpired`` or ``ReplayedRequest`` request
    once, at once, with a fresh date and nonce, and then raises.
    """

    RESIGNABLE_CODES: ClassVar[frozenset[str]] = frozenset({"RequestExpired"})
    """Codes worth one more attempt with a fresh signature. Not ``ReplayedRequest``: with a
    random nonce it means this very request reached the service before (its outcome is
    unknown), so sending it again could do it twice."""

    @property
    def resignable(self) -> bool:
        """Whether a fresh date and nonce may help (``RequestExpired``)."""
        return self.code in self.RESIGNABLE_CODES

    @property
    def clock_skew_s(self) -> float | None:
        """This machine's clock minus the service's, in seconds, when known."""
        value = self.details.get("clock_skew_s")
        return float(value) if isinstance(value, int | float) else None


class ForbiddenError(MQError):
    """403: the credentials may not do this (raised as :class:`AccessDeniedError`)."""


class AccessDeniedError(ForbiddenError):
    """403 ``AccessDenied``: the access key is valid but lacks the permission; the message
    names the action and the resource (e.g. "publish to topic orders"). Not retriable."""


class NotFoundError(MQError):
    """404: no such topic, message or route (see ``code``)."""


class ConflictError(MQError):
    """409: the topic exists or is being deleted, or a producer sequence was reused."""


class SubscriptionConflictError(ConflictError):
    """409 ``SubscriptionConflict``: the group is subscribed to the topic with another filter.

    A consumer group has one filter per topic; change it explicitly with
    :meth:`Admin.subscribe <cirrusmq.admin.Admin.subscribe>` (or ``cirrusmq group subscribe``).
    """

    @property
    def topic(self) -> str | None:
        return self.details.get("topic")

    @property
    def subscribed(self) -> str | None:
        """The filter the group has recorded for the topic."""
        return self.details.get("subscribed")

    @property
    def requested(self) -> str | None:
        """The filter the refused receive asked for."""
        return self.details.get("requested")


class PayloadTooLargeError(MQError):
    """413: a request over 6 MiB, or a body over 2 GiB (refused before anything is sent)."""


class InvalidLargeBodyError(BadRequestError):
    """400 ``InvalidLargeBody``: a message's large body is not an upload the service handed
    out for its topic, is missing (expired, not completed) or has another size."""


class LargeBodyError(MQError):
    """A large body could not be uploaded or read, or what was read does not match its
    pointer (size or SHA-256: ``code`` ``LargeBodyMismatch``). Retriable when the transfer
    itself failed."""


class ThrottledError(MQError):
    """429: too many requests; retriable."""

    default_retriable = True


class ServerError(MQError):
    """5xx: a fault on the service side; retriable."""

    default_retriable = True


class TransportError(MQError):
    """No usable response: connection refused or reset, timeout, malformed response."""

    default_retriable = True


class OutboxError(MQError):
    """Root of the local outbox's errors."""


class OutboxFullError(OutboxError):
    """The outbox (or the in-memory send buffer) is at its message-count or size bound."""


class OutboxLockedError(OutboxError):
    """Another client (in this or another process) has the outbox file open."""


class MessageKeptError(OutboxError):
    """The service refused the message for good, and the durable outbox **keeps** it (set
    aside): it is not lost, so do not send it again — ``retry_refused()`` sends it (once,
    with its original stamp) when the cause is fixed, ``purge_refused()`` drops it.

    ``code``, ``http_status`` and ``details`` are the refusal's (e.g. ``TopicNotFound``,
    404); ``refusal`` is the service's error itself and ``entry_id`` the outbox entry.
    Deliberately not a subclass of the refusal's class: code that re-sends on
    ``NotFoundError`` must not store the message twice.
    """

    def __init__(self, refusal: MQError, entry_id: int) -> None:
        super().__init__(
            f"{refusal.message}; the message is kept in the outbox (entry {entry_id}): "
            "retry_refused() sends it, purge_refused() drops it — do not send it again",
            code=refusal.code,
            http_status=refusal.http_status,
            details=refusal.details,
            retriable=False,
        )
        self.refusal = refusal
        """The service's refusal (its typed error)."""
        self.entry_id = entry_id
        """The outbox entry that keeps the message (see ``Producer.refused()``)."""


class ClientClosedError(MQError):
    """The client was closed; it accepts no more calls."""


class UnsupportedFeatureError(MQError):
    """The SDK or the service does not support something (kept for compatibility: nothing
    raises it since delayed messages — ``delivery_timestamp`` — work)."""


# ---------------------------------------------------------------------- transactions
class ProducerFencedError(ConflictError):
    """409 ``ProducerFenced``: a newer :class:`~cirrusmq.TransactionProducer` registered with
    the same producer group and transactional id; this one's sends and verdicts are refused
    (zombie fencing). Close it; the newer instance answers the checks."""

    @property
    def current_epoch(self) -> int | None:
        value = self.details.get("current_epoch")
        return value if isinstance(value, int) else None


class TransactionEndedError(ConflictError):
    """409 ``TransactionAlreadyEnded``: the transaction was committed or rolled back before;
    another verdict cannot change that (``state`` says which)."""

    @property
    def state(self) -> str | None:
        return self.details.get("state")


class LeaseMovedOnError(ConflictError):
    """409 ``LeaseMovedOn``: an exactly-once step acks a message its consumer no longer
    holds (its invisible duration passed, it was redelivered, nacked or moved out). Nothing
    of the step was sent or acked; the message comes back: process it again."""

    @property
    def receipt_handles(self) -> list[int]:
        """Positions (in the step's acks) of the handles whose lease moved on."""
        value = self.details.get("receipt_handles")
        return list(value) if isinstance(value, list) else []


class StepTooLargeError(BadRequestError):
    """400 ``StepTooLarge``: an exactly-once step needs more than one DynamoDB transaction
    holds (100 items: 2 per output queue, 1 per lease acked, 2 of its own); ``details``
    counts them. Nothing was stored: use fewer message groups or acks per step."""


_BY_CODE: dict[str, type[MQError]] = {
    "ReceiptHandleExpired": ReceiptHandleExpiredError,
    "SubscriptionConflict": SubscriptionConflictError,
    "ProducerFenced": ProducerFencedError,
    "LeaseMovedOn": LeaseMovedOnError,
    "StepTooLarge": StepTooLargeError,
    "TransactionAlreadyEnded": TransactionEndedError,
    "InvalidLargeBody": InvalidLargeBodyError,
}

_BY_STATUS: dict[int, type[MQError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: AccessDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: ThrottledError,
}


def error_from_response(status: int, body: Any) -> MQError:
    """The typed error for an HTTP error response whose JSON body is ``body``."""
    if isinstance(body, Mapping):
        code = body.get("code") if isinstance(body.get("code"), str) else None
        message = str(body.get("message") or f"HTTP {status}")
        details = body.get("details") if isinstance(body.get("details"), Mapping) else None
    else:
        code, message, details = None, f"HTTP {status}", None
    if code in _BY_CODE:
        cls = _BY_CODE[code]
    elif status in _BY_STATUS:
        cls = _BY_STATUS[status]
    elif status >= 500:
        cls = ServerError
    else:
        cls = BadRequestError
    if code == "RequestExpired" and status == 401:
        message = (
            f"{message} (requests are refused when this machine's clock is more than "
            "300 s off the service's: check the clock, e.g. that NTP is running)"
        )
    return cls(message, code=code, http_status=status, details=details)
