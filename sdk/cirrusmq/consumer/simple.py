""":class:`SimpleConsumer`: receive, ack, nack, change invisible duration — the consumer drives."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from os import PathLike

from ..client_transport import client_transport
from ..credentials import Credentials
from ..errors import MQError
from ..message import (
    FilterExpression,
    MessageView,
    parse_receive_response,
)
from ..transport import Transport
from .acks import (
    AckReply,
    AckResult,
)
from .base import ConsumerBase, _AckCall, raise_unless_acked, with_new_handle
from .channel import channel_for
from .nacks import nack_requests, nack_results
from .pacing import CHANNEL_AFTER_S, IdleWait
from .paths import group_path
from .pending_acks import make_retrier

__all__ = ["SimpleConsumer"]

log = logging.getLogger("cirrusmq.consumer")


class SimpleConsumer(ConsumerBase):
    """A consumer that receives and acks explicitly (RocketMQ 5's ``SimpleConsumer``).

    ``receive`` long-polls up to ``await_duration`` seconds; each message stays invisible to the
    group for ``invisible_duration`` seconds unless acked (then it is delivered again, with
    ``delivery_attempt`` + 1). With ``outbox_path``, an ack that cannot reach the service is
    kept (durably) and retried until the message's receipt expires, instead of raising; without
    it, such an ack raises its error (nothing is kept).
    """

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str] | Iterable[str] | None = None,
        await_duration: float | timedelta = 20,
        *,
        request_timeout_s: float = 10.0,
        max_attempts: int = 3,
        outbox_path: str | PathLike[str] | None = None,
        transport: Transport | None = None,
        notifications: bool = False,
    ) -> None:
        """``notifications``: a ``receive`` that waits (``await_duration`` > 0) waits on the
        service's notification channel instead of a server-side long poll, which keeps a
        Lambda running for the wait (docs/notifications.md); without a channel it long-polls."""
        super().__init__(endpoint, credentials, group, subscriptions, await_duration)
        self._transport, self._own_transport = client_transport(
            transport, endpoint, credentials, request_timeout_s, max_attempts
        )
        self._idle = (
            IdleWait(
                threading.Event(),
                channel=lambda: channel_for(self._transport),
                group=group,
                topics=lambda: list(self.subscriptions),
            )
            if notifications
            else None
        )
        if self._idle is not None:  # a channel wait ends when something is due
            self.due_listener = self._idle.expect_at
        self._retrier = make_retrier(self._transport, outbox_path) if outbox_path else None

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def receive(
        self, max_message_num: int = 32, invisible_duration: float | timedelta = 60
    ) -> list[MessageView]:
        """Up to ``max_message_num`` messages (1-1000), waiting up to ``await_duration``."""
        _, messages = self._receive(max_message_num, invisible_duration, None)
        return messages

    def receive_and_ack(
        self,
        acks: Iterable[MessageView | str],
        max_message_num: int = 32,
        invisible_duration: float | timedelta = 60,
    ) -> tuple[list[AckResult], list[MessageView]]:
        """Ack ``acks`` and receive, in one request: the receive carries the acks (the
        service acks them first, exactly as :meth:`ack_batch` would, then receives).

        Returns ``(ack results, messages)``: one result per ack, in order, as
        :meth:`ack_batch` gives them. More than 1,000 distinct handles go in an ack request
        of their own first. If the request fails, the acks are sent on their own
        (:meth:`ack_batch`: kept in the outbox when it has one and the service is
        unreachable) before the error is raised; acking twice is fine.
        """
        messages = list(acks)
        call = self._riding_plan(messages) if messages else None
        if call is None:
            results = self.ack_batch(messages) if messages else []
            return results, self.receive(max_message_num, invisible_duration)
        try:
            results, received = self._receive(max_message_num, invisible_duration, call)
        except MQError as error:
            if not self._may_refuse_riding(error):
                self.ack_batch(messages)
                raise
            # apart, the acks and the receive each raise their own mistake; only if both go
            # through was it the service refusing acks on receives
            results = self.ack_batch(messages)
            received = self.receive(max_message_num, invisible_duration)
            self._stop_riding(error)
            return results, received
        if results is None:  # the service did not ack them
            results = self.ack_batch(messages)
        return results, received

    def _receive(
        self,
        max_message_num: int,
        invisible_duration: float | timedelta,
        riding: _AckCall | None,
    ) -> tuple[list[AckResult] | None, list[MessageView]]:
        """Receive, waiting up to ``await_duration`` on the notification channel when it
        is on and usable (else the server waits); the first request carries ``riding``'s
        handles. Returns their results (None without ``riding``, or if the service did
        not ack them) and the messages."""
        if self._idle is None or self.await_duration_s <= 0:
            return self._receive_once(max_message_num, invisible_duration, None, riding)
        deadline = time.monotonic() + self.await_duration_s
        results: list[AckResult] | None = None
        while True:
            remaining = deadline - time.monotonic()
            usable = self._idle.usable()  # no channel: the server waits
            await_s = 0 if usable else max(0, remaining)
            acked, messages = self._receive_once(
                max_message_num, invisible_duration, await_s, riding
            )
            if riding is not None:
                results, riding = acked, None
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0 or not usable:
                return results, messages
            if self._idle.wait(max(CHANNEL_AFTER_S, remaining), max_s=remaining):
                self._idle.event.clear()  # told: receive now

    def _receive_once(
        self,
        max_message_num: int,
        invisible_duration: float | timedelta,
        await_s: float | None,
        riding: _AckCall | None,
    ) -> tuple[list[AckResult] | None, list[MessageView]]:
        """The receive plan's requests, the first carrying ``riding``'s handles. Raises the
        first request's error (the acks' fate unknown)."""
        steps = self._receive_plan(max_message_num, invisible_duration, await_s)
        results: list[AckResult] | None = None
        try:
            _, body, wait_s = next(steps)
            if riding is not None:
                body = {**body, "ack": riding.handles}
            while True:
                response = self._transport.request(
                    "POST",
                    group_path(self.group, "receive"),
                    json_body=body,
                    timeout_s=self._transport.request_timeout_s + wait_s,
                )
                if riding is not None:
                    results = riding.riding_results(response.get("acks"))
                    riding = None
                messages = parse_receive_response(response)
                self._heard_due(response, messages)
                _, body, wait_s = steps.send(messages)
        except StopIteration as done:
            return results, done.value

    def ack(self, message: MessageView | str) -> AckResult:
        """Ack one message (or receipt handle).

        Raises :class:`~cirrusmq.errors.ReceiptHandleExpiredError` if its handle is stale (the
        message was redelivered since) and :class:`~cirrusmq.errors.BadRequestError` if it is
        invalid (malformed, or of another group). Acking twice is fine. With an outbox, an ack
        the service cannot take now is kept for a retry (status ``PENDING``, no error).
        """
        (result,) = self.ack_batch([message])
        raise_unless_acked(result)
        return result

    def ack_batch(self, messages: Iterable[MessageView | str]) -> list[AckResult]:
        """Ack messages (or receipt handles), 1,000 per request; one result per message, in
        order (``acked``, ``expired``, ``invalid``, or ``pending`` when kept in the outbox).

        A stale or invalid handle does not stop the others and raises nothing: see the
        results. Request-level failures raise (without an outbox, also an unreachable service).
        """
        call = self._ack_plan(messages)
        try:
            chunk = next(call.steps)
            while True:
                reply: AckReply
                try:
                    reply = self._transport.request(
                        "POST", group_path(self.group, "ack"), json_body={"receipt_handles": chunk}
                    )
                except MQError as error:
                    reply = self._ack_failed(error, chunk, call)
                chunk = call.steps.send(reply)
        except StopIteration as done:
            return call.results(done.value)
        raise AssertionError("unreachable")  # pragma: no cover

    def change_invisible_duration(
        self, message: MessageView, invisible_duration: float | timedelta
    ) -> MessageView:
        """Make ``message`` invisible for ``invisible_duration`` from now; the message with its
        new receipt handle (the old one still acks)."""
        body = self._invisible_body(message, invisible_duration)
        response = self._transport.request(
            "POST", group_path(self.group, "invisible"), json_body=body
        )
        return with_new_handle(message, response)

    # ---------------------------------------------------------------- nack
    def nack(self, message: MessageView | str, delay: float | timedelta | None = None) -> AckResult:
        """Give ``message`` back ("reconsume later"): it is delivered again after the next
        backoff (10s 30s 1m ... 2h), or no earlier than ``delay`` seconds (rounded up to a
        backoff level), or goes to the dead-letter topic after the group's last attempt.
        Raises like :meth:`ack` for a stale or invalid handle."""
        (result,) = self.nack_batch([message], delay)
        raise_unless_acked(result)
        return result

    def nack_batch(
        self, messages: Iterable[MessageView | str], delay: float | timedelta | None = None
    ) -> list[AckResult]:
        """Nack messages; one result per distinct handle, in order (``acked`` = given back)."""
        self._check_open()
        results: list[AckResult] = []
        for handles, body in nack_requests(messages, delay):
            response = self._transport.request(
                "POST", group_path(self.group, "nack"), json_body=body
            )
            results.extend(nack_results(handles, response))
        return results

    # ---------------------------------------------------------------- end of nack

    def close(self) -> None:
        """Release the connection pool and the outbox (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._retrier is not None:
            self._retrier.close()
        if self._idle is not None:
            self._idle.close()
        if self._own_transport:
            self._transport.close()
