"""The threaded :class:`Producer`: batching, retries, idempotence, offline outbox.

How a message travels: ``send_async`` puts it in its topic's open batch (:mod:`.accumulator`);
the sender thread seals due batches — each gets this producer's id and the next sequence — into
the outbox (:mod:`cirrusmq.outbox`: SQLite with ``outbox_path``, memory otherwise), then claims the
oldest batch of every idle topic and posts it from a small thread pool. The rules (ordering,
retries, parking when the service is unreachable) live in :mod:`.send_state`.

Its size (~460 lines): the public API (send, batch, flush, close, the refused batches) and the
thread that drives :mod:`.send_state`; the I/O-free rules are already out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Collection, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..credentials import Credentials
from ..errors import ClientClosedError, MQError, OutboxError, TransportError
from ..large_body import INLINE_MAX_BYTES, is_large, upload_body
from ..message import Message, SendReceipt, scheduled_path
from ..outbox import OutboxEntry, RefusedBatch
from ..transport import RetryPolicy, Transport
from .accumulator import PendingMessage
from .send_state import ProducerOptions, SendState, open_state, prepare

__all__ = ["Producer"]

log = logging.getLogger("cirrusmq.producer")

_SEND_THREADS = 8
"""Batches of different topics posted at once."""


@dataclass(eq=False)
class _Ticket:
    message: Message
    message_id: str
    future: Future[SendReceipt] = field(default_factory=Future)
    settled: threading.Event | None = None
    """Set once stored, failed or parked (blocking sends only)."""

    def park(self) -> None:
        if self.settled is not None:
            self.settled.set()


def new_producer_id() -> str:
    return f"p-{uuid.uuid4().hex}"


def outbox_exists(path: str | PathLike[str] | None) -> bool:
    """Whether ``path`` names an outbox file that exists (an earlier producer's, maybe)."""
    return path is not None and Path(path).exists()


class Producer:
    """Sends messages in batches, idempotently, with an optional durable outbox.

    ``send`` blocks for the receipt; ``send_async`` returns a future. Use it as a context
    manager (or call :meth:`close`) so that buffered messages are sent before exit. Thread-safe.

    Batches are per topic, up to ``max_batch_messages`` / ``max_batch_bytes`` (JSON size); a
    batch is posted after ``linger_ms`` — or at once by a blocking send — when no other batch
    of its topic is in flight, so batches grow under load. Transport errors, 429 and 5xx are
    retried ``max_attempts`` times with exponential backoff and jitter, always with the same
    producer id + sequence and client-made message ids: a retry never stores twice.

    With ``outbox_path``, every accepted message is written to a SQLite outbox within about
    ``linger_ms`` (even while its topic has a request in flight), and a message the service
    cannot take (connection refused, timeout, 5xx after the retries) waits there and is resent
    later, in order, exactly once: ``send`` then returns a receipt with ``pending=True`` (it
    does not raise) and ``send_async``'s future stays pending until the message is stored. A new
    producer on the same path resumes what an earlier one (even a killed process) left behind.
    The outbox holds at most ``outbox_max_messages`` / ``outbox_max_bytes``: beyond, sends raise
    :class:`~cirrusmq.errors.OutboxFullError`. Without an outbox the same bounds apply to the
    in-memory buffer, and a send waits up to ``request_timeout_s`` for room before raising it.
    """

    outbox_retry_max_s = 5.0
    """The longest wait between two resends of a parked batch."""

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
        transport: Transport | None = None,
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
        """This producer's id: with the sequence, it makes every send request idempotent."""
        self.outbox_path = outbox_path
        self.request_timeout_s = request_timeout_s
        self._retry = self.options.retry
        self._own_transport = transport is None
        self._transport = transport or Transport(
            endpoint, credentials, request_timeout_s=request_timeout_s, retry=self._retry
        )
        self._transport_closed = False
        self._cond = threading.Condition()
        self._abort = threading.Event()
        self._state_name = "new"  # new -> running -> closing -> closed
        self._state: SendState | None = None
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._posting: set[int] = set()
        """Outbox entries whose request has started and not ended yet."""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Producer:
        """Open the outbox and start sending (idempotent; the first send calls it).

        With an outbox left by an earlier producer, its messages are resent from here on.
        """
        with self._cond:
            if self._state_name == "running":
                return self
            if self._state_name != "new":
                raise ClientClosedError("the producer is closed")
            self._state = open_state(
                self.options,
                self.producer_id,
                self._retry,
                outbox_retry_max_s=self.outbox_retry_max_s,
            )
            if self._state.buffered_messages:
                log.info(
                    "outbox %s: resuming %d message(s) left by an earlier producer",
                    self.outbox_path,
                    self._state.buffered_messages,
                )
            self._executor = ThreadPoolExecutor(_SEND_THREADS, thread_name_prefix="cirrusmq-send")
            self._thread = threading.Thread(target=self._run, name="cirrusmq-producer", daemon=True)
            self._state_name = "running"
            self._thread.start()
            return self

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self, timeout_s: float = 30.0) -> list[Message]:
        """Send what can be sent within ``timeout_s``, then stop (idempotent).

        With an outbox, whatever is still unsent stays in it, for the next producer on that
        path (waiting futures get receipts with ``pending=True``); the result is empty. It does
        not wait for a service found unreachable. A producer never started whose outbox file
        exists is started first, so that what an earlier producer left there is sent.

        Without an outbox, requests still on the wire after ``timeout_s`` get up to
        ``request_timeout_s`` more to end (without further retries). The result lists the
        messages surely not sent (their futures fail with
        :class:`~cirrusmq.errors.ClientClosedError`): sending them again cannot duplicate
        them. Messages whose request is still on the wire after that are *not* listed — the
        service may have stored them —: their futures (and blocking ``send`` calls) resolve
        when the response arrives, with the receipt or the typed error.
        """
        try:
            self._resume_outbox()
        except OutboxError as error:  # e.g. locked by another client: nothing of ours to send
            log.warning("close: the outbox %s was not resumed: %s", self.outbox_path, error)
        with self._cond:
            if self._state_name != "running":  # new, or closing/closed already
                if self._state_name == "new":
                    self._state_name = "closed"
                    self._close_transport()
                return []
            state = self._state
            assert state is not None
            self._state_name = "closing"
            state.acc.mark_urgent()
            self._cond.notify_all()
            deadline = time.monotonic() + timeout_s
            while not state.drained():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            self._abort.set()  # no new request, no more retries
            self._cond.notify_all()
        assert self._thread is not None and self._executor is not None
        self._thread.join()
        self._executor.shutdown(wait=False)  # queued posts see the abort and do nothing
        durable = state.store.durable
        with self._cond:
            if not durable:  # let the requests on the wire end: their outcome is known then
                deadline = time.monotonic() + self.request_timeout_s
                while self._posting and (remaining := deadline - time.monotonic()) > 0:
                    self._cond.wait(remaining)
            in_doubt = set() if durable else set(self._posting)
            leftovers = state.leftovers(in_doubt=in_doubt)
            self._state_name = "closed"
        if durable:
            state.store.close()
        if not in_doubt:
            self._close_transport()  # else the last of those requests closes it
        unsent: list[Message] = []
        for ticket in leftovers:
            assert isinstance(ticket, _Ticket)
            if durable:
                receipt = SendReceipt(ticket.message_id, ticket.message.topic, pending=True)
                _resolve(ticket, receipt)
            else:
                unsent.append(ticket.message)
                _resolve(ticket, ClientClosedError("the producer closed before sending this"))
        if unsent:
            log.warning("producer closed with %d unsent message(s)", len(unsent))
        if in_doubt:
            log.warning(
                "producer closed with %d request(s) still on the wire: their futures resolve "
                "when the responses arrive",
                len(in_doubt),
            )
        return unsent

    def _resume_outbox(self) -> None:
        """Start a producer never started whose outbox file exists: what an earlier producer
        left in it is sent by the ``flush`` or ``close`` that called this."""
        if self._state_name == "new" and outbox_exists(self.outbox_path):
            with contextlib.suppress(ClientClosedError):  # closed meanwhile by another thread
                self.start()

    # ------------------------------------------------------------------ refused batches
    def refused(self) -> list[RefusedBatch]:
        """The batches the service refused for good, set aside in the outbox (oldest first).

        Only a durable outbox (``outbox_path``) keeps them; without one the list is empty (the
        refused messages' futures failed, nothing else keeps them).
        """
        with self._cond:
            return self._open_state().store.refused()

    def retry_refused(self, entry_ids: Collection[int] | None = None) -> int:
        """Send refused batches again (all when ``entry_ids`` is ``None``), e.g. once the topic
        exists: each goes back to its original place in line, unchanged — same producer id,
        sequence and message ids (a refused request stored nothing, so this cannot duplicate
        anything). Returns how many messages were put back; ``flush()`` waits for them."""
        with self._cond:
            moved = self._open_state().retry_refused(entry_ids)
            self._cond.notify_all()
        return sum(len(r.message_ids) for r in moved)

    def purge_refused(self, entry_ids: Collection[int] | None = None) -> int:
        """Delete refused batches (all when ``entry_ids`` is ``None``); how many messages."""
        with self._cond:
            purged = self._open_state().store.purge_refused(entry_ids)
        if purged:
            log.warning("outbox %s: purged %d refused batch(es)", self.outbox_path, len(purged))
        return sum(len(r.message_ids) for r in purged)

    def _open_state(self) -> SendState:
        if self._state_name == "new":
            self.start()  # (re-entrant: the condition's lock is an RLock)
        if self._state_name != "running" or self._state is None:
            raise ClientClosedError("the producer is closed")
        return self._state

    def _close_transport(self) -> None:
        with self._cond:
            if self._transport_closed or not self._own_transport:
                return
            self._transport_closed = True
        self._transport.close()

    # ------------------------------------------------------------------ sending
    def send(self, message: Message) -> SendReceipt:
        """Send ``message`` now and wait for its receipt.

        Raises the typed error if the service refused it, or — without an outbox — could not
        be reached after ``max_attempts``. With an outbox, an unreachable service yields a
        receipt with ``pending=True`` instead (the message is safe in the outbox).
        """
        (ticket,) = self._submit([message], blocking=True)
        return _wait(ticket)

    def send_async(self, message: Message) -> Future[SendReceipt]:
        """Queue ``message``; the future resolves to its receipt (or the typed error).

        With an outbox, the future stays pending while the service is unreachable.
        """
        (ticket,) = self._submit([message], blocking=False)
        return ticket.future

    def send_batch(self, messages: Iterable[Message]) -> list[SendReceipt]:
        """Send several messages now, together (as few requests as the batch bounds allow),
        and wait for their receipts (in order)."""
        return [_wait(t) for t in self._submit(list(messages), blocking=True)]

    # ------------------------------------------------------------------ delayed messages
    def cancel_scheduled(
        self,
        receipt_or_topic: SendReceipt | str,
        message_id: str | None = None,
        delivery_timestamp: int | None = None,
    ) -> None:
        """Cancel a scheduled (delayed) message before it is due: pass its send receipt, or
        topic, message id and due time. Idempotent; ``ConflictError`` (AlreadyDelivered)
        once it was delivered, ``NotFoundError`` when no such message is scheduled then."""
        path, params = scheduled_path(receipt_or_topic, message_id, delivery_timestamp)
        self._transport.request("DELETE", path, params=params)

    def flush(self, timeout_s: float | None = None) -> None:
        """Send every buffered message now; wait until each is stored (or, with an outbox,
        parked in it because the service is unreachable). ``TimeoutError`` on timeout.

        The futures of the stored messages may still be completing (on the sender's threads)
        when it returns: wait on the futures themselves to see every outcome. On a producer
        never started whose outbox file exists, it starts it first: what an earlier producer
        left in the outbox is sent too.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self._resume_outbox()
        with self._cond:
            if self._state_name != "running":
                return
            state = self._state
            assert state is not None
            state.acc.mark_urgent()
            self._cond.notify_all()
            while not state.drained():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError("flush did not complete in time")
                self._cond.wait(remaining)

    def _submit(self, messages: list[Message], *, blocking: bool) -> list[_Ticket]:
        if self._state_name == "new":
            self.start()
        messages = [self._offloaded(m) for m in messages]
        born_ms = int(time.time() * 1000)
        items = []
        for message in messages:
            message_id, wire, size = prepare(message, born_ms)
            ticket = _Ticket(message, message_id, settled=threading.Event() if blocking else None)
            items.append((ticket, PendingMessage(message_id, wire, size, ticket)))
        count, size = len(items), sum(p.size for _, p in items)
        deadline = time.monotonic() + self.request_timeout_s
        with self._cond:
            while True:
                if self._state_name != "running":
                    raise ClientClosedError("the producer is closed")
                state = self._state
                assert state is not None
                if state.has_room(count, size):
                    break
                remaining = deadline - time.monotonic()
                if state.store.durable or remaining <= 0:
                    raise state.full_error()
                self._cond.wait(remaining)
            if state.add(items, urgent=blocking):
                self._cond.notify_all()
        return [t for t, _ in items]

    def _offloaded(self, message: Message) -> Message:
        """``message`` itself, or — when its body is a file or over
        ``large_body_threshold_bytes`` — the message naming its body uploaded now, in the
        calling thread (even for ``send_async``: the upload is the send's slow part)."""
        if message.large_body is not None or not is_large(
            message.body, self.options.large_body_threshold_bytes
        ):
            return message
        pointer = upload_body(self._transport, message.topic, message.body)
        return dataclasses.replace(message, body=b"", large_body=pointer)

    # ------------------------------------------------------------------ sender thread
    def _run(self) -> None:
        state = self._state
        assert state is not None and self._executor is not None
        with self._cond:
            while not self._abort.is_set():
                try:
                    state.seal_due()
                    for entry, policy in state.claim():
                        post = self._executor.submit(self._post, entry, policy)
                        post.add_done_callback(_log_failure)
                except Exception:  # a storage fault must not stop the sender for good
                    log.exception("the producer's sender failed; retrying in 1 s")
                    self._cond.wait(1.0)
                    continue
                self._cond.wait(state.idle_timeout())

    def _post(self, entry: OutboxEntry, policy: RetryPolicy) -> None:
        state = self._state
        assert state is not None
        with self._cond:
            if self._abort.is_set():
                return  # closing: never sent (close() reports it, or it stays in the outbox)
            self._posting.add(entry.entry_id)
        body: Any = None
        error: MQError | None = None
        try:
            body = self._transport.request(
                "POST",
                f"/v1/topics/{quote(entry.batch.topic, safe='')}/messages",
                content=entry.batch.payload,
                retry=policy,
                interrupt=self._abort,
            )
        except MQError as exc:
            error = exc
        except Exception as exc:  # a bug or a malformed exchange: retriable, never silent
            log.exception("sending a batch to %s failed unexpectedly", entry.batch.topic)
            error = TransportError(f"sending failed unexpectedly: {exc!r}")
        outcomes: list = []
        with self._cond:
            self._posting.discard(entry.entry_id)
            closed = self._state_name == "closed"
            last = closed and not self._posting
            # After close a durable outbox is shut: the batch is resent by the next producer.
            if not (closed and state.store.durable):
                outcomes = state.settle(entry, body=body, error=error)
            self._cond.notify_all()
        for ticket, outcome in outcomes:
            _resolve(ticket, outcome)
        if last:
            self._close_transport()


def _log_failure(post: Future[None]) -> None:
    if not post.cancelled() and post.exception() is not None:
        log.error("a send task failed", exc_info=post.exception())


def _resolve(ticket: _Ticket, outcome: SendReceipt | BaseException) -> None:
    """Complete a caller's future (outside any lock: callbacks may call the producer)."""
    if not ticket.future.done():
        if isinstance(outcome, BaseException):
            ticket.future.set_exception(outcome)
        else:
            ticket.future.set_result(outcome)
    if ticket.settled is not None:
        ticket.settled.set()


def _wait(ticket: _Ticket) -> SendReceipt:
    assert ticket.settled is not None
    ticket.settled.wait()
    if ticket.future.done():
        return ticket.future.result()
    return SendReceipt(ticket.message_id, ticket.message.topic, pending=True)
