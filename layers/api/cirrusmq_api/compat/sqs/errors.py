"""SQS errors: the code each protocol carries, and the broker errors they stand for."""

from __future__ import annotations

from cirrusmq_broker.errors import (
    AccessDenied as BrokerAccessDenied,
)
from cirrusmq_broker.errors import (
    BrokerError,
    InvalidReceiptHandle,
    NotFound,
    TopicBeingDeleted,
    TopicNotFound,
)


class SqsError(Exception):
    """An SQS error answer.

    ``code`` is the JSON protocol's ``__type`` name; ``query_code`` the query protocol's
    ``Code`` (and the JSON answer's ``x-amzn-query-error`` header, which botocore reports
    as the error code); ``query_message`` the query protocol's message where SQS words it
    otherwise than in JSON.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 400,
        query_code: str | None = None,
        query_message: str | None = None,
        sender: bool = True,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.query_code = query_code or code
        self.query_message = query_message or message
        self.sender = sender


def invalid_parameter(message: str) -> SqsError:
    return SqsError("InvalidParameterValue", message)


def batch_error(code: str, message: str) -> SqsError:
    """A batch request's error: its query code is ``AWS.SimpleQueueService.<code>``."""
    return SqsError(code, message, query_code=f"AWS.SimpleQueueService.{code}")


def empty_batch(entry_type: str) -> SqsError:
    """A batch without entries; ``entry_type`` names the request's entries
    (``SendMessageBatchRequestEntry``), as SQS's message does."""
    return batch_error(
        "EmptyBatchRequest", f"There should be at least one {entry_type} in the request."
    )


def missing_parameter(name: str) -> SqsError:
    return SqsError("MissingParameter", f"The request must contain the parameter {name}.")


def queue_does_not_exist() -> SqsError:
    """SQS's unknown-queue error: the query protocol's message names the WSDL version."""
    return SqsError(
        "QueueDoesNotExist",
        "The specified queue does not exist.",
        query_code="AWS.SimpleQueueService.NonExistentQueue",
        query_message="The specified queue does not exist for this wsdl version.",
    )


def queue_deleted_recently() -> SqsError:
    """A queue created again while its deleted namesake is still being removed."""
    return batch_error(
        "QueueDeletedRecently",
        "You must wait 60 seconds after deleting a queue before you can create another with "
        "the same name.",
    )


def receipt_handle_invalid(message: str = "The input receipt handle is invalid.") -> SqsError:
    return SqsError("ReceiptHandleIsInvalid", message)


def access_denied(message: str) -> SqsError:
    return SqsError("AccessDenied", message, status=403, query_code="AccessDenied")


def from_broker(exc: BrokerError) -> SqsError:
    """The SQS error a broker error stands for (4xx stay the sender's, never a 5xx)."""
    if isinstance(exc, TopicNotFound):
        return queue_does_not_exist()
    if isinstance(exc, TopicBeingDeleted):
        return queue_deleted_recently()
    if isinstance(exc, InvalidReceiptHandle) or exc.code in (
        "ForeignReceiptHandle",
        "ReceiptHandleExpired",
    ):
        return receipt_handle_invalid(exc.message)
    if isinstance(exc, BrokerAccessDenied):
        return access_denied(exc.message)
    if exc.http_status == 429:
        return SqsError("RequestThrottled", exc.message, status=400)
    if exc.http_status >= 500:
        return SqsError("ServiceUnavailable", exc.message, status=503, sender=False)
    if isinstance(exc, NotFound):
        return invalid_parameter(exc.message)
    return invalid_parameter(exc.message)
