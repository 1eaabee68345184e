"""Ack results: one :class:`AckResult` per receipt handle, and the plan of an ack call.

The service answers ``POST /v1/groups/{group}/ack`` with ``{"acked": N, "results": [...]}``:
one result per handle, in request order, ``acked`` (also when acked before), ``expired`` or
``invalid``; one bad handle does not fail the others. Services of the former shape answered
``{"acked": N}`` (all acked) or refused the whole request with 400 when a handle was stale,
forged or foreign; :func:`ack_plan` handles both, so the SDK works during the transition.

Also the handles of an ack or nack call with their expiry (:func:`handles_of`) and the log of
the handles that did not settle (:func:`log_unacked`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..errors import MQError, TransportError, error_from_response
from ..message import MessageView

__all__ = [
    "MAX_ACK_HANDLES",
    "AckResult",
    "AckStatus",
    "ack_plan",
    "handles_of",
    "is_per_handle_error",
    "is_too_wide",
    "log_unacked",
    "parse_ack_response",
]

log = logging.getLogger("cirrusmq.consumer")

MAX_ACK_HANDLES = 1000
"""Receipt handles per ack request (the service's limit)."""


class AckStatus(StrEnum):
    """What became of one receipt handle."""

    ACKED = "acked"
    """Settled (now, or before: acking twice is fine)."""
    EXPIRED = "expired"
    """Stale: the message was redelivered since (code ``ReceiptHandleExpired``)."""
    INVALID = "invalid"
    """Malformed, or of another group (``InvalidReceiptHandle``, ``ForeignReceiptHandle``)."""
    PENDING = "pending"
    """SDK only: the service could not be reached; the ack waits in the outbox for a retry."""


_STATUS_OF_CODE = {
    "ReceiptHandleExpired": AckStatus.EXPIRED,
    "InvalidReceiptHandle": AckStatus.INVALID,
    "ForeignReceiptHandle": AckStatus.INVALID,
}
_CODE_OF_STATUS = {
    AckStatus.EXPIRED: "ReceiptHandleExpired",
    AckStatus.INVALID: "InvalidReceiptHandle",
}


@dataclass(frozen=True)
class AckResult:
    """The outcome of acking one message."""

    receipt_handle: str
    status: AckStatus
    code: str | None = None
    """The service's code when not acked, e.g. ``ReceiptHandleExpired``."""
    message: str | None = None
    """The service's explanation when not acked."""
    message_id: str | None = None
    """The message's id, when a ``MessageView`` (not a bare handle) was acked."""

    @property
    def acked(self) -> bool:
        return self.status is AckStatus.ACKED

    @property
    def final(self) -> bool:
        """Nothing more will come of it: acked, expired or invalid (not pending)."""
        return self.status is not AckStatus.PENDING

    def error(self) -> MQError | None:
        """The typed error of an expired or invalid handle (``None`` otherwise):
        :class:`~cirrusmq.errors.ReceiptHandleExpiredError` or
        :class:`~cirrusmq.errors.BadRequestError`."""
        if self.status not in (AckStatus.EXPIRED, AckStatus.INVALID):
            return None
        code = self.code or _CODE_OF_STATUS[self.status]
        return error_from_response(
            400,
            {
                "code": code,
                "message": self.message or f"receipt handle {self.status.value}",
                "details": {"receipt_handles": [self.receipt_handle]},
            },
        )


def is_per_handle_error(error: MQError) -> bool:
    """Whether ``error`` is a former-shape refusal of a whole ack because of some handles."""
    return error.http_status == 400 and error.code in _STATUS_OF_CODE


def _result(item: Mapping[str, Any], handle: str) -> AckResult:
    code = item.get("code") if isinstance(item.get("code"), str) else None
    message = item.get("message") if isinstance(item.get("message"), str) else None
    try:
        status = AckStatus(item.get("status"))
    except ValueError:
        status = _STATUS_OF_CODE.get(code or "", AckStatus.INVALID)
        message = message or f"unknown ack status {item.get('status')!r}"
    if status is AckStatus.PENDING:  # not a status the service gives
        status = AckStatus.INVALID
    return AckResult(handle, status, code, message)


def is_too_wide(error: MQError) -> bool:
    """Whether ``error`` refused a whole ack for spanning more queues than one request may
    (``details.max_queues``): the handles are sent again in smaller requests."""
    return (
        error.http_status == 400
        and error.code == "InvalidRequest"
        and "max_queues" in (error.details or {})
    )


def parse_ack_response(handles: Sequence[str], body: Any) -> list[AckResult]:
    """The results of a successful ack request for ``handles``, in their order.

    ``{"acked": N}`` without ``results`` (the former shape, all or nothing) means every handle
    was acked. Results are matched by ``receipt_handle``, else by position; a response that
    leaves a handle without a result raises :class:`~cirrusmq.errors.TransportError`.
    """
    items = body.get("results") if isinstance(body, Mapping) else None
    if items is None:
        return [AckResult(h, AckStatus.ACKED) for h in handles]
    if not isinstance(items, list):
        raise TransportError("malformed ack response: 'results' is not a list")
    by_handle = {
        item["receipt_handle"]: item
        for item in items
        if isinstance(item, Mapping) and isinstance(item.get("receipt_handle"), str)
    }
    positional = len(items) == len(handles)
    results = []
    for index, handle in enumerate(handles):
        item = by_handle.get(handle)
        if item is None and positional and isinstance(items[index], Mapping):
            item = items[index]
        if item is None:
            raise TransportError("malformed ack response: a receipt handle has no result")
        results.append(_result(item, handle))
    return results


AckReply = Mapping[str, Any] | MQError | list[AckResult]
"""What an ack request came to: its response body, a former-shape per-handle refusal
(:func:`is_per_handle_error`), or results the caller decided (e.g. ``PENDING``)."""


def ack_plan(handles: Sequence[str]) -> Generator[list[str], AckReply, list[AckResult]]:
    """The ack requests for ``handles``, as a generator: it yields the handles of a request
    (at most :data:`MAX_ACK_HANDLES`) and is sent what that request came to (:data:`AckReply`).
    Returns one result per handle, in the order given.

    A former-shape refusal is resolved here: the handles it names get their status and the
    others are acked again; when it names none, the request is split in halves until the
    culprit is alone. A request refused for spanning too many queues (:func:`is_too_wide`)
    is split in halves too.
    """
    unique = list(dict.fromkeys(handles))
    work = [unique[i : i + MAX_ACK_HANDLES] for i in range(0, len(unique), MAX_ACK_HANDLES)]
    work.reverse()  # a stack: the first chunk on top
    results: dict[str, AckResult] = {}
    while work:
        chunk = work.pop()
        reply = yield chunk
        if isinstance(reply, list):
            results.update((r.receipt_handle, r) for r in reply)
        elif isinstance(reply, MQError) and is_too_wide(reply):
            if len(chunk) < 2:
                raise reply
            middle = len(chunk) // 2  # each half spans fewer queues
            work += [chunk[middle:], chunk[:middle]]
        elif isinstance(reply, MQError):
            status = _STATUS_OF_CODE[reply.code or ""]
            named = set(reply.details.get("receipt_handles") or ()) & set(chunk)
            if named or len(chunk) == 1:
                refused = named or set(chunk)
                for handle in refused:
                    results[handle] = AckResult(handle, status, reply.code, reply.message)
                rest = [h for h in chunk if h not in refused]
                if rest:
                    work.append(rest)
            else:
                middle = len(chunk) // 2
                work += [chunk[middle:], chunk[:middle]]
        else:
            results.update((r.receipt_handle, r) for r in parse_ack_response(chunk, reply))
    return [results[h] for h in handles]


_UNKNOWN_EXPIRY_S = 12 * 3600
"""How long an ack of a bare receipt handle (no ``invisible_until`` known) is retried."""


def handles_of(messages: Iterable[MessageView | str]) -> list[tuple[str, int]]:
    """``(receipt_handle, expires_ms)`` of each message (a bare handle expires in 12 h)."""
    unknown = int(time.time() * 1000) + _UNKNOWN_EXPIRY_S * 1000
    pairs = []
    for message in messages:
        if isinstance(message, str):
            pairs.append((message, unknown))
            continue
        if message.receipt_handle is None:
            raise ValueError(f"message {message.message_id} was not received: it has no handle")
        pairs.append((message.receipt_handle, message.invisible_until or unknown))
    return pairs


def log_unacked(results: Iterable[AckResult], group: str, *, what: str = "ack") -> None:
    """Log the handles that ended expired (info: redelivered meanwhile) or invalid (error)."""
    expired = [r for r in results if r.status is AckStatus.EXPIRED]
    invalid = [r for r in results if r.status is AckStatus.INVALID]
    if expired:
        log.info("%s: %d receipt handle(s) of %s had expired", what, len(expired), group)
    if invalid:
        log.error(
            "%s: %d receipt handle(s) of %s were refused (%s)",
            what,
            len(invalid),
            group,
            ", ".join(sorted({r.code or "invalid" for r in invalid})),
        )
