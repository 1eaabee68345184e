""":class:`PushConsumer`: the SDK receives, a listener processes, the SDK acks.

Three parts: a fetcher thread long-polls the subscriptions whenever there is room under
``max_cached_messages`` (flow control: never more messages in memory than that); a pool of
``consume_threads`` runs the listener; an acker thread acks successes in batches. A failed
message (``ConsumeResult.FAILURE`` or an exception) is made visible again after a backoff
(10 s, 30 s, 1 min, 2 min, ... like RocketMQ's retry levels) and redelivered with
``delivery_attempt`` + 1. Acks that cannot reach the service are retried until their receipt
expires (in memory, or in the SQLite outbox at ``outbox_path``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from os import PathLike

from .consumer import MAX_WAIT_S, AckRetrier, SimpleConsumer, handles_of, make_retrier
from .credentials import Credentials
from .errors import ClientClosedError, MQError, NotFoundError, ReceiptHandleExpiredError
from .message import ConsumeResult, FilterExpression, MessageView
from .transport import RetryPolicy, Transport

__all__ = ["MessageListener", "PushConsumer"]

log = logging.getLogger("cirrusmq.push_consumer")

MessageListener = Callable[[MessageView], ConsumeResult]
"""Processes one message; returns ``SUCCESS`` or ``FAILURE`` (raising counts as FAILURE)."""

RETRY_DELAYS_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
"""How long a failed message stays invisible, by delivery attempt (RocketMQ's levels)."""

_ACK_BATCH = 256
_ACK_LINGER_S = 0.05


class PushConsumer:
    """Delivers messages to ``listener`` on a thread pool, acking what it processed.

    ``start()`` begins fetching; ``shutdown(timeout_s)`` stops fetching, lets the listeners
    finish the messages already fetched (within the timeout), and acks every success before
    it returns. Messages not processed by then are not acked: the service delivers them again
    once their invisible duration ends — nothing is lost. Also a context manager.
    """

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str] | Iterable[str],
        listener: MessageListener,
        *,
        consume_threads: int = 8,
        max_cached_messages: int = 1024,
        receive_batch_size: int = 32,
        invisible_duration_s: int = 60,
        await_duration_s: float = 5,
        request_timeout_s: float = 10.0,
        max_attempts: int = 3,
        outbox_path: str | PathLike[str] | None = None,
        transport: Transport | None = None,
    ) -> None:
        if consume_threads < 1 or max_cached_messages < 1:
            raise ValueError("consume_threads and max_cached_messages must be at least 1")
        self.group = group
        self.listener = listener
        self.consume_threads = consume_threads
        self.max_cached_messages = max_cached_messages
        self.receive_batch_size = min(receive_batch_size, 1000)
        self.invisible_duration_s = invisible_duration_s
        self._own_transport = transport is None
        self._transport = transport or Transport(
            endpoint,
            credentials,
            request_timeout_s=request_timeout_s,
            retry=RetryPolicy(max_attempts=max_attempts),
        )
        self._consumer = SimpleConsumer(
            endpoint,
            credentials,
            group,
            subscriptions,
            min(await_duration_s, MAX_WAIT_S),
            transport=self._transport,
        )
        self._outbox_path = outbox_path
        self._cond = threading.Condition()
        self._cached = 0
        self._state = "new"  # new -> running -> stopping -> stopped
        self._stopping = threading.Event()
        self._acks: queue.SimpleQueue[MessageView | None] = queue.SimpleQueue()
        self._executor: ThreadPoolExecutor | None = None
        self._threads: list[threading.Thread] = []
        self._retrier: AckRetrier | None = None
        self.max_cached_seen = 0
        """The most messages this consumer held at once (for flow-control checks)."""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> PushConsumer:
        """Start fetching and consuming (idempotent)."""
        with self._cond:
            if self._state == "running":
                return self
            if self._state != "new":
                raise ClientClosedError("the push consumer was shut down")
            self._retrier = make_retrier(self._transport, self._outbox_path)
            self._executor = ThreadPoolExecutor(
                self.consume_threads, thread_name_prefix=f"cirrusmq-consume-{self.group}"
            )
            self._threads = [
                threading.Thread(target=self._fetch_loop, name="cirrusmq-fetch", daemon=True),
                threading.Thread(target=self._ack_loop, name="cirrusmq-ack", daemon=True),
            ]
            self._state = "running"
        for thread in self._threads:
            thread.start()
        return self

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop fetching, wait for the listeners (up to ``timeout_s``), ack the successes."""
        with self._cond:
            if self._state != "running":  # new, or stopping/stopped already
                if self._state == "new":
                    self._state = "stopped"
                return
            self._state = "stopping"
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        fetcher, acker = self._threads
        fetcher.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            while self._cached and self._cond.wait(max(0.0, deadline - time.monotonic())):
                pass
            self._state = "stopped"  # a late fetch is dropped: it is redelivered later
            abandoned = self._cached
        assert self._executor is not None and self._retrier is not None
        self._executor.shutdown(wait=False, cancel_futures=True)
        if abandoned:
            log.warning("shutdown: %d message(s) left unprocessed (redelivered later)", abandoned)
        self._acks.put(None)  # the acker acks what is queued, then stops
        acker.join()
        if self._retrier.pending():
            self._retrier.flush_once()
            if not self._retrier.store.durable and self._retrier.pending():
                log.warning(
                    "shutdown: %d ack(s) could not reach the service", self._retrier.pending()
                )
        self._retrier.close()
        self._consumer.close()
        if self._own_transport:
            self._transport.close()

    @property
    def cached_messages(self) -> int:
        """Messages fetched and not yet finished by a listener."""
        return self._cached

    # ------------------------------------------------------------------ fetching
    def _fetch_loop(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            with self._cond:
                while self._cached >= self.max_cached_messages and not self._stopping.is_set():
                    self._cond.wait(0.5)
                room = min(self.receive_batch_size, self.max_cached_messages - self._cached)
            if self._stopping.is_set():
                return
            try:
                messages = self._consumer.receive(room, self.invisible_duration_s)
            except MQError as error:
                failures += 1
                delay = min(5.0, 0.2 * 2**failures)
                level = logging.ERROR if isinstance(error, NotFoundError) else logging.WARNING
                log.log(level, "receive failed (%s); retrying in %.1f s", error, delay)
                self._stopping.wait(delay)
                continue
            failures = 0
            self._dispatch(messages)

    def _dispatch(self, messages: list[MessageView]) -> None:
        with self._cond:
            if self._state not in ("running", "stopping") or not messages:
                return
            assert self._executor is not None
            self._cached += len(messages)
            self.max_cached_seen = max(self.max_cached_seen, self._cached)
            for message in messages:
                self._executor.submit(self._consume, message)

    # ------------------------------------------------------------------ consuming
    def _consume(self, message: MessageView) -> None:
        try:
            try:
                result = self.listener(message)
            except Exception:
                log.exception("listener failed on message %s", message.message_id)
                result = ConsumeResult.FAILURE
            if result is ConsumeResult.SUCCESS:
                self._acks.put(message)
            else:
                if result is not ConsumeResult.FAILURE:
                    log.warning("listener returned %r, not a ConsumeResult: FAILURE", result)
                self._retry_later(message)
        finally:
            with self._cond:
                self._cached -= 1
                self._cond.notify_all()

    def _retry_later(self, message: MessageView) -> None:
        attempt = max(1, message.delivery_attempt)
        delay = RETRY_DELAYS_S[min(attempt, len(RETRY_DELAYS_S)) - 1]
        try:
            self._consumer.change_invisible_duration(message, delay)
        except MQError as error:  # it comes back anyway when its invisible time ends
            log.info("could not reschedule message %s: %s", message.message_id, error)

    # ------------------------------------------------------------------ acking
    def _ack_loop(self) -> None:
        stop = False
        while not stop:
            item = self._acks.get()
            batch: list[MessageView] = []
            deadline = time.monotonic() + _ACK_LINGER_S
            while True:
                if item is None:
                    stop = True
                else:
                    batch.append(item)
                if stop or len(batch) >= _ACK_BATCH:
                    break
                try:
                    item = self._acks.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            if batch:
                self._ack(batch)

    def _ack(self, batch: list[MessageView]) -> None:
        assert self._retrier is not None
        try:
            self._consumer.ack_batch(batch)
        except ReceiptHandleExpiredError as error:
            log.info("%d ack(s) were stale (redelivered meanwhile)", len(error.receipt_handles))
        except MQError as error:
            if not error.retriable:
                log.error("ack refused: %s", error)
                return
            log.warning("ack unreachable (%s): %d kept for retry", error, len(batch))
            self._retrier.park(self.group, handles_of(batch))
