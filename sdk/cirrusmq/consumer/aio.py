""":class:`AsyncSimpleConsumer`: :class:`~cirrusmq.consumer.SimpleConsumer` on asyncio.

It shares :class:`~cirrusmq.consumer.base.ConsumerBase` with the threaded consumer; the I/O runs
on the event loop with ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from os import PathLike

from ..credentials import Credentials
from ..errors import MQError
from ..message import (
    FilterExpression,
    MessageView,
    parse_receive_response,
)
from ..transport import AsyncTransport, RetryPolicy, Transport
from .acks import AckReply, AckResult
from .base import ConsumerBase, _AckCall, raise_unless_acked, with_new_handle
from .channel import NotificationChannel, channel_for
from .nacks import nack_requests, nack_results
from .pacing import CHANNEL_AFTER_S, IdleWait
from .paths import group_path
from .pending_acks import make_retrier

__all__ = ["AsyncSimpleConsumer"]


class AsyncSimpleConsumer(ConsumerBase):
    """:class:`~cirrusmq.consumer.SimpleConsumer` on asyncio.

    With ``outbox_path``, acks the service cannot take are kept and retried by a background
    thread until their receipts expire (as in the threaded consumer).
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
        transport: AsyncTransport | None = None,
        notifications: bool = False,
    ) -> None:
        """``notifications``: a ``receive`` that waits does so on the service's notification
        channel instead of a server-side long poll (as ``SimpleConsumer``'s option)."""
        super().__init__(endpoint, credentials, group, subscriptions, await_duration)
        retry = RetryPolicy(max_attempts=max_attempts)
        self._own_transport = transport is None
        self._transport = transport or AsyncTransport(
            endpoint, credentials, request_timeout_s=request_timeout_s, retry=retry
        )
        if outbox_path:
            retry_transport = Transport(
                endpoint, credentials, request_timeout_s=request_timeout_s, retry=retry
            )
            self._retrier = make_retrier(retry_transport, outbox_path)
            self._retry_transport = retry_transport
        self._idle: IdleWait | None = None
        if notifications:

            def channel() -> NotificationChannel | None:
                probe = Transport(endpoint, credentials, request_timeout_s=request_timeout_s)
                try:  # the channel's URL comes from GET /v1/health (a blocking call)
                    return channel_for(probe)
                finally:
                    probe.close()

            self._idle = IdleWait(
                threading.Event(),
                channel=channel,
                group=group,
                topics=lambda: list(self.subscriptions),
            )
            self.due_listener = self._idle.expect_at  # a channel wait ends when something is due

    async def __aenter__(self) -> AsyncSimpleConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def receive(
        self, max_message_num: int = 32, invisible_duration: float | timedelta = 60
    ) -> list[MessageView]:
        """Up to ``max_message_num`` messages, waiting up to ``await_duration``."""
        _, messages = await self._receive(max_message_num, invisible_duration, None)
        return messages

    async def receive_and_ack(
        self,
        acks: Iterable[MessageView | str],
        max_message_num: int = 32,
        invisible_duration: float | timedelta = 60,
    ) -> tuple[list[AckResult], list[MessageView]]:
        """Ack ``acks`` and receive in one request (see
        :meth:`cirrusmq.SimpleConsumer.receive_and_ack`)."""
        messages = list(acks)
        call = self._riding_plan(messages) if messages else None
        if call is None:
            results = await self.ack_batch(messages) if messages else []
            return results, await self.receive(max_message_num, invisible_duration)
        try:
            results, received = await self._receive(max_message_num, invisible_duration, call)
        except MQError as error:
            if not self._may_refuse_riding(error):
                await self.ack_batch(messages)
                raise
            # apart, the acks and the receive each raise their own mistake; only if both go
            # through was it the service refusing acks on receives
            results = await self.ack_batch(messages)
            received = await self.receive(max_message_num, invisible_duration)
            self._stop_riding(error)
            return results, received
        if results is None:  # the service did not ack them
            results = await self.ack_batch(messages)
        return results, received

    async def _receive(
        self,
        max_message_num: int,
        invisible_duration: float | timedelta,
        riding: _AckCall | None,
    ) -> tuple[list[AckResult] | None, list[MessageView]]:
        """As :meth:`cirrusmq.SimpleConsumer._receive`."""
        idle = self._idle
        if idle is None or self.await_duration_s <= 0:
            return await self._receive_once(max_message_num, invisible_duration, None, riding)
        deadline = time.monotonic() + self.await_duration_s
        results: list[AckResult] | None = None
        while True:
            remaining = deadline - time.monotonic()
            usable = await asyncio.to_thread(idle.usable)  # no channel: the server waits
            await_s = 0 if usable else max(0, remaining)
            acked, messages = await self._receive_once(
                max_message_num, invisible_duration, await_s, riding
            )
            if riding is not None:
                results, riding = acked, None
            remaining = deadline - time.monotonic()
            if messages or remaining <= 0 or not usable:
                return results, messages
            delay = max(CHANNEL_AFTER_S, remaining)
            if await asyncio.to_thread(idle.wait, delay, max_s=remaining):
                idle.event.clear()  # told: receive now

    async def _receive_once(
        self,
        max_message_num: int,
        invisible_duration: float | timedelta,
        await_s: float | None,
        riding: _AckCall | None,
    ) -> tuple[list[AckResult] | None, list[MessageView]]:
        """The receive plan's requests, the first carrying ``riding``'s handles."""
        steps = self._receive_plan(max_message_num, invisible_duration, await_s)
        results: list[AckResult] | None = None
        try:
            _, body, wait_s = next(steps)
            if riding is not None:
                body = {**body, "ack": riding.handles}
            while True:
                response = await self._transport.request(
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

    async def ack(self, message: MessageView | str) -> AckResult:
        """Ack one message; raises the typed error if its handle is stale or invalid."""
        (result,) = await self.ack_batch([message])
        raise_unless_acked(result)
        return result

    async def ack_batch(self, messages: Iterable[MessageView | str]) -> list[AckResult]:
        """Ack messages; one :class:`~cirrusmq.consumer.acks.AckResult` per message, in order."""
        call = self._ack_plan(messages)
        try:
            chunk = next(call.steps)
            while True:
                reply: AckReply
                try:
                    reply = await self._transport.request(
                        "POST", group_path(self.group, "ack"), json_body={"receipt_handles": chunk}
                    )
                except MQError as error:
                    reply = self._ack_failed(error, chunk, call)
                chunk = call.steps.send(reply)
        except StopIteration as done:
            return call.results(done.value)
        raise AssertionError("unreachable")  # pragma: no cover

    async def change_invisible_duration(
        self, message: MessageView, invisible_duration: float | timedelta
    ) -> MessageView:
        """Make ``message`` invisible for ``invisible_duration`` from now (new handle)."""
        body = self._invisible_body(message, invisible_duration)
        response = await self._transport.request(
            "POST", group_path(self.group, "invisible"), json_body=body
        )
        return with_new_handle(message, response)

    # ---------------------------------------------------------------- nack
    async def nack(
        self, message: MessageView | str, delay: float | timedelta | None = None
    ) -> AckResult:
        """Give ``message`` back (see :meth:`cirrusmq.SimpleConsumer.nack`)."""
        (result,) = await self.nack_batch([message], delay)
        raise_unless_acked(result)
        return result

    async def nack_batch(
        self, messages: Iterable[MessageView | str], delay: float | timedelta | None = None
    ) -> list[AckResult]:
        """Nack messages; one result per distinct handle, in order."""
        self._check_open()
        results: list[AckResult] = []
        for handles, body in nack_requests(messages, delay):
            response = await self._transport.request(
                "POST", group_path(self.group, "nack"), json_body=body
            )
            results.extend(nack_results(handles, response))
        return results

    # ---------------------------------------------------------------- end of nack

    async def close(self) -> None:
        """Release the connection pool and the outbox (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._retrier is not None:
            await asyncio.to_thread(self._retrier.close)
            self._retry_transport.close()
        if self._idle is not None:
            self._idle.event.set()  # a receive waiting on the channel returns
            self._idle.close()
        if self._own_transport:
            await self._transport.close()
