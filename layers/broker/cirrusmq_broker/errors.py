"""The broker's error root and its stable codes.

Every error carries a stable ``code``, the HTTP status the API maps it to and whether a
client may retry it. The HTTP layer maps them in one place; services only raise them.
"""

from __future__ import annotations

from typing import Any, ClassVar


class BrokerError(Exception):
    """Root of every error the broker reports to a caller."""

    code: ClassVar[str] = "InternalError"
    http_status: ClassVar[int] = 500
    retriable: ClassVar[bool] = True

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or {}


class InvalidRequest(BrokerError):
    code, http_status, retriable = "InvalidRequest", 400, False


class InvalidTopicName(InvalidRequest):
    code = "InvalidTopicName"


class InvalidGroupName(InvalidRequest):
    code = "InvalidGroupName"


class InvalidMessage(InvalidRequest):
    code = "InvalidMessage"


class InvalidLargeBody(InvalidRequest):
    """A large-body pointer names no finished upload of this topic, or the wrong size."""

    code = "InvalidLargeBody"


class TooManyMessages(InvalidRequest):
    code = "TooManyMessages"


class MessageGroupRequired(InvalidRequest):
    code = "MessageGroupRequired"


class InvalidFilterExpression(InvalidRequest):
    code = "InvalidFilterExpression"


class InvalidDuration(InvalidRequest):
    code = "InvalidDuration"


class InvalidReceiptHandle(InvalidRequest):
    code = "InvalidReceiptHandle"


class ForeignReceiptHandle(InvalidRequest):
    code = "ForeignReceiptHandle"


class ReceiptHandleExpired(InvalidRequest):
    code = "ReceiptHandleExpired"


class NotFound(BrokerError):
    code, http_status, retriable = "NotFound", 404, False


class TopicNotFound(NotFound):
    code = "TopicNotFound"


class MessageNotFound(NotFound):
    code = "MessageNotFound"


class MoveTaskNotFound(NotFound):
    """No such move task, or it is not running."""

    code = "MoveTaskNotFound"


class GroupNotFound(NotFound):  # dead letters of a group never seen
    code = "GroupNotFound"


class Conflict(BrokerError):
    code, http_status, retriable = "Conflict", 409, False


class MoveTaskRunning(Conflict):
    """The source group already has a running move task."""

    code = "MoveTaskRunning"


class TopicAlreadyExists(Conflict):
    code = "TopicAlreadyExists"


class TopicBeingDeleted(Conflict):
    code = "TopicBeingDeleted"


class IdempotencyConflict(Conflict):
    code = "IdempotencyConflict"


class MessageTooLarge(BrokerError):
    code, http_status, retriable = "MessageTooLarge", 413, False


class RequestTooLarge(BrokerError):
    code, http_status, retriable = "RequestTooLarge", 413, False


class UnsupportedMediaType(BrokerError):
    """The request body's Content-Type cannot be JSON."""

    code, http_status, retriable = "UnsupportedMediaType", 415, False


class Throttled(BrokerError):
    code, http_status, retriable = "Throttled", 429, True


class TooManyInflight(BrokerError):
    """A queue holds as many unacked messages for the group as a state item can track."""

    code, http_status, retriable = "TooManyInflight", 429, True


class Busy(BrokerError):
    """Contention on a queue's tail or a group's state did not settle in time."""

    code, http_status, retriable = "Busy", 503, True


class SubscriptionConflict(Conflict):
    """A group member asked with another filter than the group's subscription."""

    code = "SubscriptionConflict"


class StorageUnavailable(BrokerError):
    """AWS failed, conflicted or could not be reached (after the SDK's retries).

    The caller sees 503 ``Busy``; it is not a :class:`Busy`, so the services' handling of
    contention (skip a contended queue, retry an append) never swallows it.
    """

    code, http_status, retriable = "Busy", 503, True


class StorageContended(StorageUnavailable):
    """A DynamoDB write or transaction was refused only because other writes held its items
    at that moment (TransactionConflict) or it was throttled: nothing was written, and the
    same request may be sent again. Stores whose callers re-read and retry (appends,
    group state saves) catch it; anywhere else the caller sees 503 ``Busy``."""


class Unauthenticated(BrokerError):
    """The request is not signed by a known, enabled access key (401)."""

    code, http_status, retriable = "Unauthenticated", 401, False


class MissingSignature(Unauthenticated):
    """No or a garbled ``Authorization``, ``X-Cirrus-Date`` or ``X-Cirrus-Nonce`` header."""

    code = "MissingSignature"


class InvalidSignature(Unauthenticated):
    """Unknown, disabled or deleted key, or a signature mismatch (never said which)."""

    code = "InvalidSignature"


class RequestExpired(Unauthenticated):
    """The request's date is too far from the service's clock."""

    code = "RequestExpired"


class ReplayedRequest(Unauthenticated):
    """The nonce was seen before for this access key within the replay window."""

    code = "ReplayedRequest"


class AccessDenied(BrokerError):
    """Authenticated, but the access key lacks the permission (403)."""

    code, http_status, retriable = "AccessDenied", 403, False


class KeyNotFound(NotFound):
    code = "KeyNotFound"


class KeyInUse(Conflict):
    """An access key cannot disable or delete itself."""

    code = "KeyInUse"


# ---------------------------------------------------------------- reads by offset, offset reset
class InvalidOffset(InvalidRequest):
    """An offset below 0 or beyond the queue's next offset."""

    code = "InvalidOffset"


class InvalidTimestamp(InvalidRequest):
    code = "InvalidTimestamp"


class QueueNotFound(NotFound):
    """A queue number the topic does not have."""

    code = "QueueNotFound"


# ------------------------------------------------------------------ transactions
class TransactionRequired(InvalidRequest):
    """A plain send to a TRANSACTION topic: use the transaction API."""

    code = "TransactionRequired"


class NotTransactional(InvalidRequest):
    """A transactional send to a topic that is not of type TRANSACTION."""

    code = "NotTransactional"


class TransactionNotFound(NotFound):
    code = "TransactionNotFound"


class ProducerNotRegistered(NotFound):
    """The transactional id was never registered for the producer group."""

    code = "ProducerNotRegistered"


class ProducerFenced(Conflict):
    """A newer producer registered with the same transactional id: this one is a zombie."""

    code = "ProducerFenced"


class TransactionAlreadyEnded(Conflict):
    """The transaction was committed or rolled back; another verdict cannot change that."""

    code = "TransactionAlreadyEnded"


class TransactionTopicMismatch(Conflict):
    """Every message of one transaction goes to one topic."""

    code = "TransactionTopicMismatch"


class TooManyTransactionParts(InvalidRequest):
    """A transaction holds at most ``limits``' number of sends."""

    code = "TooManyTransactionParts"


class TooManyQueues(InvalidRequest):
    """One send (or one transaction) would append to more queues than one atomic append
    can (49): use fewer message groups per request."""

    code = "TooManyQueues"


class TransactionTooLarge(InvalidRequest):
    """The transaction records too many message ids to take this send; commit it and
    start another."""

    code = "TransactionTooLarge"


class LeaseMovedOn(Conflict):
    """An exactly-once step acks a message its consumer no longer holds (the lease passed
    its deadline, was redelivered, or a message of it was nacked or moved out): the step is
    refused and nothing of it is appended; the message comes back."""

    code = "LeaseMovedOn"


class StepTooLarge(InvalidRequest):
    """An exactly-once step needs more items than one DynamoDB transaction holds (100):
    fewer output queues or fewer leases per step."""

    code = "StepTooLarge"


# ------------------------------------------------------------- end of transactions block
# ---------------------------------------------------------------- delayed messages
class InvalidDelay(InvalidRequest):
    """A bad delay level, a delivery time too far ahead, or both set."""

    code = "InvalidDelay"


class DelayNotAllowed(InvalidRequest):
    """Delays on a FIFO or TRANSACTION topic (a delay would break order / the transaction)."""

    code = "DelayNotAllowed"


class TooManyDueTimes(InvalidRequest):
    code = "TooManyDueTimes"


class TooManyWaits(InvalidRequest):
    """A notification channel wait over the (group, topic) pairs one connection or one
    access key may wait on (docs/notifications.md)."""

    code = "TooManyWaits"


class ScheduledMessageNotFound(NotFound):
    code = "ScheduledMessageNotFound"


class AlreadyDelivered(Conflict):
    """The scheduled message was due and moved into its topic: too late to cancel."""

    code = "AlreadyDelivered"
