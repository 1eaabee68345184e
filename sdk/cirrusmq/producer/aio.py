""":class:`AsyncProducer`: :class:`~cirrusmq.producer.Producer` on asyncio.

Same semantics as the threaded producer, sharing its bookkeeping
(:class:`~cirrusmq.producer.send_state.SendState`); the I/O runs on the event loop with
``httpx.AsyncClient``. The SQLite outbox is called inline (a few short local transactions per
batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Collection, Iterable
from os import PathLike
from typing import Any
from urllib.parse import quote

from ..credentials import Credentials
from ..errors import ClientClosedError, MQError, TransportError
from ..large_body import INLINE_MAX_BYTES, grant_request, is_large, upload_granted
from ..message import (
    Message,
    SendReceipt,
    scheduled_path,
)
from ..outbox import OutboxEntry, RefusedBatch
from ..transport import AsyncTransport, RetryPolicy
from .accumulator import PendingMessage
from .producer import new_producer_id, outbox_exists
from .send_state import ProducerOptions, SendState, open_state, prepare

__all__ = ["AsyncProducer"]

log = logging.getLogger("cirrusmq.producer")


@dataclasses.dataclass(eq=False)
class _Ticket:
    message: Message
    message_id: str
    future: asyncio.Future[SendReceipt]
    settled: asyncio.Event | None = None

    def park(self) -> None:
        if self.settled is not None:
            self.settled.set()

    def resolve(self, outcome: SendReceipt | BaseException) -> None:
        if not self.future.done():
            if isinstance(outcome, BaseException):
                self.future.set_exception(outcome)
            else:
                self.future.set_result(outcome)
        if self.settled is not None:
            self.settled.set()

    async def wait(self) -> SendReceipt:
        assert self.settled is not None
        await self.settled.wait()
        if self.future.done():
            return self.future.result()
        return SendReceipt(self.message_id, self.message.topic, pending=True)


class AsyncProducer:
    """:class:`~cirrusmq.producer.Producer` on asyncio (same options, same guarantees).

    ``await send(msg)`` returns the receipt; ``await send_async(msg)`` queues the message and
    returns an ``asyncio.Future`` of it (awaiting only for room in the buffer). Use
    ``async with`` or ``await close()``.
    """

    outbox_retry_max_s = 5.0

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        linger_ms: float = 5,
        max_batch_messages: int = 500,
        max_batch_bytes: int = 1024 * 1024,
        max_attempts: int = 3,
        request_timeout_s: float = 10.0,
        outbox_path: str | PathLike[str] | None = None,
        outbox_max_messages: int = 100_000,
        outbox_max_bytes: int = 256 * 1024 * 1024,
        large_body_threshold_bytes: int = INLINE_MAX_BYTES,
        transport: AsyncTransport | None = None,
    ) -> None:
        self.options = ProducerOptions(
            linger_ms=linger_ms,
            max_batch_messages=max_batch_messages,
            max_batch_bytes=max_batch_bytes,
            max_attempts=max_attempts,
            request_timeout_s=request_timeout_s,
            outbox_path=outbox_path,
            outbox_max_messages=outbox_max_messages,
            outbox_max_bytes=outbox_max_bytes,
            large_body_threshold_bytes=large_body_threshold_bytes,
        )
        self.endpoint = endpoint
        self.credentials = credentials
        self.producer_id = new_producer_id()
        self.outbox_path = outbox_path
        self.request_timeout_s = request_timeout_s
        self._retry = self.options.retry
        self._own_transport = transport is None
        self._transport = transport or AsyncTransport(
            endpoint, credentials, request_timeout_s=request_timeout_s, retry=self._retry
        )
        self._transport_closed = False
        self._state_name = "new"
        self._state: SendState | None = None
        self._changed: asyncio.Condition | None = None
        self._abort: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._posts: set[asyncio.Task[None]] = set()
        self._posting: set[int] = set()
        """Outbox entries whose request has started and not ended yet."""

    async def start(self) -> AsyncProducer:
        """Open the outbox and start sending (idempotent; the first send calls it)."""
        if self._state_name == "running":
            return self
        if self._state_name != "new":
            raise ClientClosedError("the producer is closed")
        self._state = open_state(
            self.options, self.producer_id, self._retry, outbox_retry_max_s=self.outbox_retry_max_s
        )
        self._changed = asyncio.Condition()
        self._abort = asyncio.Event()
        self._state_name = "running"
        self._runner = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aenter__(self) -> AsyncProducer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def send(self, message: Message) -> SendReceipt:
        """Send now and wait for the receipt (``pending=True`` when parked in the outbox)."""
        (ticket,) = await self._submit([message], blocking=True)
        return await ticket.wait()

    async def send_async(self, message: Message) -> asyncio.Future[SendReceipt]:
        """Queue ``message``; a future of its receipt."""
        (ticket,) = await self._submit([message], blocking=False)
        return ticket.future

    async def send_batch(self, messages: Iterable[Message]) -> list[SendReceipt]:
        """Send several messages now, together; their receipts in order."""
        tickets = await self._submit(list(messages), blocking=True)
        return [await t.wait() for t in tickets]

    async def cancel_scheduled(
        self,
        receipt_or_topic: SendReceipt | str,
        message_id: str | None = None,
        delivery_timestamp: int | None = None,
    ) -> None:
        """As :meth:`cirrusmq.Producer.cancel_scheduled`."""
        path, params = scheduled_path(receipt_or_topic, message_id, delivery_timestamp)
        await self._transport.request("DELETE", path, params=params)

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send everything buffered; wait until stored (or parked in the outbox). A producer
        never started whose outbox file exists is started first (its leftovers are sent)."""
        await self._resume_outbox()
        if self._state_name != "running":
            return
        state, changed = self._state, self._changed
        assert state is not None and changed is not None
        async with changed:
            state.acc.mark_urgent()
            changed.notify_all()
            await asyncio.wait_for(changed.wait_for(state.drained), timeout_s)

    async def close(self, timeout_s: float = 30.0) -> list[Message]:
        """Like :meth:`Producer.close <cirrusmq.producer.Producer.close>`: without an outbox,
        requests still on the wire get up to ``request_timeout_s`` more; those still going
        after that are not reported as unsent, their futures resolve when they end (while the
        event loop runs)."""
        await self._resume_outbox()
        if self._state_name != "running":  # new, or closing/closed already
            if self._state_name == "new":
                self._state_name = "closed"
                await self._close_transport()
            return []
        state, changed, abort = self._state, self._changed, self._abort
        assert state is not None and changed is not None and abort is not None
        assert self._runner is not None
        self._state_name = "closing"
        async with changed:
            state.acc.mark_urgent()
            changed.notify_all()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait_for(state.drained), timeout_s)
        abort.set()  # no new request, no more retries
        self._runner.cancel()
        await asyncio.gather(self._runner, return_exceptions=True)
        durable = state.store.durable
        posts = list(self._posts)
        if durable:  # the outbox keeps the batches: nothing to wait for
            for task in posts:
                task.cancel()
            await asyncio.gather(*posts, return_exceptions=True)
        elif posts:  # let the requests on the wire end: their outcome is known then
            await asyncio.wait(posts, timeout=self.request_timeout_s)
        in_doubt = set() if durable else set(self._posting)
        leftovers = state.leftovers(in_doubt=in_doubt)
        self._state_name = "closed"
        if durable:
            state.store.close()
        if not in_doubt:
            await self._close_transport()  # else the last of those requests closes it
        unsent = []
        for ticket in leftovers:
            assert isinstance(ticket, _Ticket)
            if durable:
                ticket.resolve(SendReceipt(ticket.message_id, ticket.message.topic, pending=True))
            else:
                unsent.append(ticket.message)
                ticket.resolve(ClientClosedError("the producer closed before sending this"))
        if unsent:
            log.warning("producer closed with %d unsent message(s)", len(unsent))
        if in_doubt:
            log.warning(
                "producer closed with %d request(s) still on the wire: their futures resolve "
                "when the responses arrive",
                len(in_doubt),
            )
        return unsent

    async def _resume_outbox(self) -> None:
        if self._state_name == "new" and outbox_exists(self.outbox_path):
            await self.start()

    async def refused(self) -> list[RefusedBatch]:
        """Like :meth:`Producer.refused <cirrusmq.producer.Producer.refused>`."""
        return (await self._open_state()).store.refused()

    async def retry_refused(self, entry_ids: Collection[int] | None = None) -> int:
        """Like :meth:`Producer.retry_refused <cirrusmq.producer.Producer.retry_refused>`."""
        state = await self._open_state()
        assert self._changed is not None
        async with self._changed:
            moved = state.retry_refused(entry_ids)
            self._changed.notify_all()
        return sum(len(r.message_ids) for r in moved)

    async def purge_refused(self, entry_ids: Collection[int] | None = None) -> int:
        """Like :meth:`Producer.purge_refused <cirrusmq.producer.Producer.purge_refused>`."""
        purged = (await self._open_state()).store.purge_refused(entry_ids)
        return sum(len(r.message_ids) for r in purged)

    async def _open_state(self) -> SendState:
        if self._state_name == "new":
            await self.start()
        if self._state_name != "running" or self._state is None:
            raise ClientClosedError("the producer is closed")
        return self._state

    async def _close_transport(self) -> None:
        if self._own_transport and not self._transport_closed:
            self._transport_closed = True
            await self._transport.close()

    async def _offloaded(self, message: Message) -> Message:
        """``message``, or the message naming its body uploaded now (see Producer)."""
        if message.large_body is not None or not is_large(
            message.body, self.options.large_body_threshold_bytes
        ):
            return message
        path, request = grant_request(message.topic, message.body)
        grant = await self._transport.request("POST", path, json_body=request)
        pointer = await asyncio.to_thread(upload_granted, grant, message.body)
        return dataclasses.replace(message, body=b"", large_body=pointer)

    async def _submit(self, messages: list[Message], *, blocking: bool) -> list[_Ticket]:
        if self._state_name == "new":
            await self.start()
        messages = [await self._offloaded(m) for m in messages]
        loop = asyncio.get_running_loop()
        born_ms = int(time.time() * 1000)
        items = []
        for message in messages:
            message_id, wire, size = prepare(message, born_ms)
            ticket = _Ticket(
                message, message_id, loop.create_future(), asyncio.Event() if blocking else None
            )
            items.append((ticket, PendingMessage(message_id, wire, size, ticket)))
        count, size = len(items), sum(p.size for _, p in items)
        state, changed = self._state, self._changed
        assert state is not None and changed is not None
        async with changed:
            if self._state_name != "running":
                raise ClientClosedError("the producer is closed")
            if not state.has_room(count, size):
                if state.store.durable:
                    raise state.full_error()
                try:
                    await asyncio.wait_for(
                        changed.wait_for(
                            lambda: self._state_name != "running" or state.has_room(count, size)
                        ),
                        self.request_timeout_s,
                    )
                except TimeoutError:
                    raise state.full_error() from None
                if self._state_name != "running":
                    raise ClientClosedError("the producer is closed")
            if state.add(items, urgent=blocking):
                changed.notify_all()
        return [t for t, _ in items]

    async def _run(self) -> None:
        state, changed = self._state, self._changed
        assert state is not None and changed is not None
        loop = asyncio.get_running_loop()
        async with changed:
            while True:
                try:
                    state.seal_due()
                    for entry, policy in state.claim():
                        task = loop.create_task(self._post(entry, policy))
                        self._posts.add(task)
                        task.add_done_callback(self._post_done)
                except Exception:
                    log.exception("the producer's sender failed; retrying in 1 s")
                    timeout: float | None = 1.0
                else:
                    timeout = state.idle_timeout()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), timeout)

    def _post_done(self, task: asyncio.Task[None]) -> None:
        self._posts.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a send task failed", exc_info=task.exception())

    async def _post(self, entry: OutboxEntry, policy: RetryPolicy) -> None:
        state, changed, abort = self._state, self._changed, self._abort
        assert state is not None and changed is not None and abort is not None
        if abort.is_set():
            return  # closing: never sent (close() reports it, or it stays in the outbox)
        self._posting.add(entry.entry_id)
        body: Any = None
        error: MQError | None = None
        try:
            body = await self._transport.request(
                "POST",
                f"/v1/topics/{quote(entry.batch.topic, safe='')}/messages",
                content=entry.batch.payload,
                retry=policy,
                interrupt=abort,
            )
        except MQError as exc:
            error = exc
        except Exception as exc:  # a bug or a malformed exchange: retriable, never silent
            log.exception("sending a batch to %s failed unexpectedly", entry.batch.topic)
            error = TransportError(f"sending failed unexpectedly: {exc!r}")
        finally:
            self._posting.discard(entry.entry_id)
        closed = self._state_name == "closed"
        outcomes: list = []
        # After close a durable outbox is shut: the batch is resent by the next producer.
        if not (closed and state.store.durable):
            async with changed:
                outcomes = state.settle(entry, body=body, error=error)
                changed.notify_all()
        for ticket, outcome in outcomes:
            ticket.resolve(outcome)
        if closed and not self._posting:
            await self._close_transport()
