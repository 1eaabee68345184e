"""What the simple consumers share: :class:`ConsumerBase` (threads and asyncio), the receive
plan over several subscriptions (:func:`receive_steps`, written once for both) and the ack call
bookkeeping (per-handle results: :mod:`.acks`; unreachable acks kept: :mod:`.pending_acks`)."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from datetime import timedelta
from typing import Any

from ..credentials import Credentials
from ..errors import ClientClosedError, MQError, TransportError
from ..message import (
    FilterExpression,
    MessageView,
    normalize_subscriptions,
    parse_receive_due,
)
from ..wire import read_optional_int, read_str
from .acks import (
    MAX_ACK_HANDLES,
    AckReply,
    AckResult,
    AckStatus,
    ack_plan,
    handles_of,
    is_per_handle_error,
    is_too_wide,
)
from .pending_acks import AckRetrier

__all__ = ["ConsumerBase", "receive_steps", "seconds"]

log = logging.getLogger("cirrusmq.consumer")

MAX_WAIT_S = 20
ReceiveRequest = tuple[str, dict[str, Any], float]
"""(topic, JSON body, seconds the service may wait)."""


def seconds(value: float | timedelta) -> float:
    """A duration given as seconds or a ``timedelta``, in seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def receive_steps(
    subscriptions: Mapping[str, FilterExpression],
    *,
    start: int,
    max_messages: int,
    invisible_s: int,
    await_s: float,
    client_id: str | None = None,
) -> Generator[ReceiveRequest, list[MessageView], list[MessageView]]:
    """The receive requests of one ``receive`` call, as a generator.

    It yields ``(topic, body, wait_s)`` and is sent the messages each request returned. With
    one subscription: one long poll. With several: one sweep without waiting over every topic
    (starting from a different one each call, so none starves), and if that found nothing,
    long polls of ``await_s / n`` seconds over them in turn until ``await_s`` is spent.
    """
    topics = list(subscriptions)
    if not topics:
        raise ValueError("no subscriptions: call subscribe(topic) first")
    offset = start % len(topics)
    topics = topics[offset:] + topics[:offset]

    def request(topic: str, room: int, wait_s: float) -> ReceiveRequest:
        body = {
            "topic": topic,
            **subscriptions[topic].wire,
            "max_messages": room,
            "invisible_seconds": invisible_s,
            "wait_seconds": wait_s,
        }
        if client_id is not None:  # orderly receive on FIFO topics takes its queue locks
            body["client_id"] = client_id
        return topic, body, wait_s

    if len(topics) == 1:
        return (yield request(topics[0], max_messages, await_s))
    received: list[MessageView] = []
    for topic in topics:
        received += yield request(topic, max_messages - len(received), 0)
        if len(received) >= max_messages:
            return received
    if received or await_s <= 0:
        return received
    slice_s = max(1.0, math.ceil(await_s / len(topics)))
    deadline = time.monotonic() + await_s
    for topic in itertools.cycle(topics):
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            return received
        received += yield request(topic, max_messages, round(min(slice_s, remaining), 3))
        if received:
            return received
    raise AssertionError("unreachable")  # pragma: no cover


class ConsumerBase:
    """What :class:`SimpleConsumer` and :class:`~cirrusmq.aio.AsyncSimpleConsumer` share:
    subscriptions, the receive plan, ack bookkeeping (stale handles, keeping unreachable acks)
    and the change-invisible request. The subclasses only do the I/O."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str] | Iterable[str] | None,
        await_duration: float | timedelta,
    ) -> None:
        self.endpoint = endpoint
        self.credentials = credentials
        self.group = group
        self.await_duration_s = min(seconds(await_duration), MAX_WAIT_S)
        self._subscriptions = normalize_subscriptions(subscriptions)
        self._retrier: AckRetrier | None = None
        self._rotation = itertools.count()
        self._closed = False
        self.client_id: str | None = None
        """Sent with every receive: on FIFO topics it holds the queue locks (orderly)."""
        self.acks_ride = True
        """Acks may ride on receives; False once the service refused a receive carrying
        them (a service before that was possible): acks then go on their own."""
        self.due_listener: Callable[[float], None] | None = None
        """Told when (``time.monotonic()``) something an empty receive could not serve yet
        may become receivable (another consumer's lease ends, a retry's backoff passes: the
        response's ``next_due_ms``), which no notification announces: the idle wait on the
        notification channel (:meth:`~.pacing.IdleWait.expect_at`) ends then."""

    @property
    def subscriptions(self) -> dict[str, FilterExpression]:
        """Topic -> filter, a copy."""
        return dict(self._subscriptions)

    def subscribe(self, topic: str, filter_expression: FilterExpression | str = "*") -> None:
        """Receive from ``topic`` too (or change the filter this client asks for).

        The service records one filter per group and topic: a receive with another filter than
        the recorded one raises :class:`~cirrusmq.errors.SubscriptionConflictError`; change the
        group's filter with :meth:`Admin.subscribe <cirrusmq.admin.Admin.subscribe>`.
        """
        self._subscriptions.update(normalize_subscriptions({topic: filter_expression}))

    def unsubscribe(self, topic: str) -> None:
        """Stop receiving from ``topic``."""
        self._subscriptions.pop(topic, None)

    @property
    def pending_acks(self) -> int:
        """Acks waiting in the outbox for the service (0 without an outbox)."""
        return self._retrier.pending() if self._retrier is not None else 0

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    def _receive_plan(
        self,
        max_message_num: int,
        invisible_duration: float | timedelta,
        await_s: float | None = None,
    ) -> Generator[ReceiveRequest, list[MessageView], list[MessageView]]:
        """``await_s``: this receive's server wait (default ``await_duration``)."""
        self._check_open()
        return receive_steps(
            self._subscriptions,
            start=next(self._rotation),
            max_messages=max_message_num,
            invisible_s=int(seconds(invisible_duration)),
            await_s=self.await_duration_s if await_s is None else await_s,
            client_id=self.client_id,
        )

    def _heard_due(self, response: Any, messages: list[MessageView]) -> None:
        """Pass an empty receive's ``next_due_ms`` on to :attr:`due_listener`."""
        if messages or self.due_listener is None:
            return
        due_s = parse_receive_due(response)
        if due_s is not None:
            self.due_listener(time.monotonic() + due_s)

    def _ack_plan(self, messages: Iterable[MessageView | str]) -> _AckCall:
        self._check_open()
        return _AckCall(list(messages))

    def _riding_plan(self, messages: Iterable[MessageView | str]) -> _AckCall | None:
        """The ack call of ``messages`` if they can ride on one receive (1 to
        :data:`MAX_ACK_HANDLES` distinct handles), else None (ack them on their own)."""
        call = self._ack_plan(messages)
        return call if self.acks_ride and 1 <= len(call.handles) <= MAX_ACK_HANDLES else None

    def _may_refuse_riding(self, error: MQError) -> bool:
        """Whether ``error`` (answering a receive carrying acks) may be a service's refusal
        of acks on receives (400 InvalidRequest, as a service before them answers). It may
        as well be a mistake of the acks or of the receive: the caller then acks and
        receives apart, and calls :meth:`_stop_riding` only if both go through."""
        return self.acks_ride and error.http_status == 400 and error.code == "InvalidRequest"

    def _stop_riding(self, error: MQError) -> None:
        """The service refused acks on a receive that went through without them: from then
        on acks go on their own (unless the acks spanned too many queues: their own mistake,
        which acking them apart split)."""
        if is_too_wide(error):
            return
        log.info("the service does not take acks on receives (%s): acking on their own", error)
        self.acks_ride = False

    def _ack_failed(self, error: MQError, chunk: list[str], call: _AckCall) -> AckReply:
        """What to send the ack plan after ``error``; raises the errors it cannot handle. With
        an outbox, acks the service cannot take now are kept for a retry (``PENDING``)."""
        if is_per_handle_error(error) or is_too_wide(error):
            return error
        if not (error.retriable and self._retrier is not None):
            raise error
        log.warning("ack unreachable (%s): %d kept for retry", error, len(chunk))
        self._retrier.park(self.group, [(h, call.expiry[h]) for h in chunk])
        return [AckResult(h, AckStatus.PENDING) for h in chunk]

    def _invisible_body(
        self, message: MessageView, invisible_duration: float | timedelta
    ) -> dict[str, Any]:
        self._check_open()
        if message.receipt_handle is None:
            raise ValueError(f"message {message.message_id} was not received: it has no handle")
        return {
            "receipt_handle": message.receipt_handle,
            "invisible_seconds": int(seconds(invisible_duration)),
        }


class _AckCall:
    """One ``ack_batch`` call: its handles, their expiry and message ids, and its plan."""

    def __init__(self, messages: list[MessageView | str]) -> None:
        pairs = handles_of(messages)
        self.expiry = dict(pairs)
        self.handles = list(self.expiry)
        """The distinct handles, in order."""
        self.message_ids = {
            m.receipt_handle: m.message_id for m in messages if isinstance(m, MessageView)
        }
        self.steps = ack_plan([h for h, _ in pairs])

    def riding_results(self, acks: Any) -> list[AckResult] | None:
        """The results of the handles that rode on a receive, from its response's ``acks``
        (None if it has none: a service that did not ack them)."""
        if not isinstance(acks, Mapping):
            return None
        chunk = next(self.steps)
        try:
            self.steps.send(acks)
        except StopIteration as done:
            return self.results(done.value)
        raise TransportError(f"receive acked {len(chunk)} of {len(self.handles)} handles")

    def results(self, results: list[AckResult]) -> list[AckResult]:
        """``results`` with the message ids of the messages acked."""
        return [
            dataclasses.replace(r, message_id=self.message_ids.get(r.receipt_handle))
            for r in results
        ]


def raise_unless_acked(result: AckResult) -> None:
    """Raise the typed error of a single-message ack that did not settle."""
    error = result.error()
    if error is not None:
        raise error


def with_new_handle(message: MessageView, response: Mapping[str, Any]) -> MessageView:
    return dataclasses.replace(
        message,
        receipt_handle=read_str(response, "receipt_handle"),
        invisible_until=read_optional_int(response, "invisible_until"),
    )
