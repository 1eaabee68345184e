"""The protocol's errors: an HTTP status and a code from ApsaraMQ's HTTP error codes."""

from __future__ import annotations

from cirrusmq_broker.errors import (
    AccessDenied,
    BrokerError,
    InvalidRequest,
    MessageTooLarge,
    RequestTooLarge,
    Throttled,
    TopicNotFound,
    Unauthenticated,
)


class MqHttpError(Exception):
    """An answer in the protocol's ``<Error>`` shape."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def invalid_argument(message: str) -> MqHttpError:
    return MqHttpError(400, "InvalidArgument", message)


def malformed_xml(message: str) -> MqHttpError:
    return MqHttpError(400, "MalformedXML", message)


def message_not_exist() -> MqHttpError:
    return MqHttpError(404, "MessageNotExist", "Message not exist.")


def signature_mismatch() -> MqHttpError:
    return MqHttpError(403, "SignatureDoesNotMatch", "the request signature does not match")


_BY_CLASS: tuple[tuple[type[BrokerError], int, str], ...] = (
    (TopicNotFound, 404, "TopicNotExist"),
    (Unauthenticated, 403, "SignatureDoesNotMatch"),
    (AccessDenied, 403, "AccessDenied"),
    (MessageTooLarge, 400, "InvalidArgument"),
    (RequestTooLarge, 400, "InvalidArgument"),
    (Throttled, 429, "QpsLimitExceeded"),
    (InvalidRequest, 400, "InvalidArgument"),
)


def from_broker(exc: BrokerError) -> MqHttpError:
    """The protocol's error for a broker error: its code where ApsaraMQ has one, else the
    broker's own code with the broker's status (4xx stays 4xx, faults are InternalError)."""
    for cls, status, code in _BY_CLASS:
        if isinstance(exc, cls):
            return MqHttpError(status, code, exc.message)
    if exc.http_status >= 500:
        return MqHttpError(exc.http_status, "InternalError", exc.message)
    return MqHttpError(exc.http_status, exc.code, exc.message)
