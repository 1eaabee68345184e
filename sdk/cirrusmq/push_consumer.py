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
from .message import ConsumeResult, FilterExpression, MessageView, normalize_subscriptions
from .transport import RetryPolicy, Transport

__all__ = ["MessageListener", "PushConsumer"]

log = logging.getLogger("cirrusmq.push_consumer")

MessageListener = Callable[[MessageView], ConsumeResult]
"""Processes one message; returns ``SUCCESS`` or ``FAILURE`` (raising counts as FAILURE)."""

RETRY_DELAYS_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
"""How long a failed message stays invisible, by delivery attempt (RocketMQ's levels)."""

_ACK_BATCH = 256
_ACK_LINGER_S = 0.05
_RELEASE_INVISIBLE_S = 10
"""The shortest invisible duration the service takes: a message fetched too late comes back
after it."""
_BAD_HANDLE_CODES = frozenset({"InvalidReceiptHandle", "ForeignReceiptHandle"})


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
        subscriptions = normalize_subscriptions(subscriptions)
        if not subscriptions:
            raise ValueError("a push consumer needs at least one subscription")
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
        self._acks_closed = False
        """The acker took its stop marker: later successes are acked directly."""
        self._await_s = min(await_duration_s, MAX_WAIT_S)
        self._idle = True
        """The last receive came back empty: the next one long-polls (else it does not wait)."""
        self._sweeping = False
        """A receive that does not wait is in progress (shutdown waits for it)."""
        self._fetcher_done = False
        self._acker_done = False
        self._released = False
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
        """Stop fetching, wait for the listeners (up to ``timeout_s``), ack the successes.

        While messages flow the fetcher's receives do not wait (only one that came back empty
        is followed by a long poll): such a receive in progress is waited for, and its messages
        processed. A long poll in progress is not: messages it brings after the shutdown are
        released (visible again after 10 s, the service's minimum). Listeners still running
        when the time is up finish in the background and their successes are still acked; the
        connection pool is closed once they are done.
        """
        with self._cond:
            if self._state != "running":  # new, or stopping/stopped already
                if self._state == "new":
                    self._state = "stopped"
                    self._fetcher_done = self._acker_done = True
                    release = True
                else:
                    release = False
            else:
                self._state = "stopping"
                release = None
        if release is not None:
            if release:
                self._release_if_idle()
            return
        deadline = time.monotonic() + timeout_s
        self._stopping.set()
        with self._cond:
            while self._cached or self._sweeping:
                if not self._cond.wait(max(0.0, deadline - time.monotonic())):
                    break
            self._state = "stopped"  # a later fetch is released; unstarted listeners skip
            abandoned = self._cached
            self._acks_closed = True
            self._acks.put(None)  # the acker acks what is queued, then stops
        assert self._executor is not None and self._retrier is not None
        self._executor.shutdown(wait=False)
        if abandoned:
            log.warning(
                "shutdown: %d message(s) not finished in time (the running listeners go on and "
                "their successes are acked; the others are redelivered later)",
                abandoned,
            )
        acker = self._threads[1]
        acker.join()
        if self._retrier.pending():
            self._retrier.flush_once()
            if not self._retrier.store.durable and self._retrier.pending():
                log.warning(
                    "shutdown: %d ack(s) could not reach the service", self._retrier.pending()
                )
        self._retrier.close()
        with self._cond:
            self._acker_done = True
        self._release_if_idle()

    def _release_if_idle(self) -> None:
        """Close the connection pool once nothing runs any more (after shutdown)."""
        with self._cond:
            if self._released or self._state != "stopped" or self._cached:
                return
            if not (self._fetcher_done and self._acker_done):
                return
            self._released = True
        self._consumer.close()
        if self._own_transport:
            self._transport.close()

    @property
    def cached_messages(self) -> int:
        """Messages fetched and not yet finished by a listener."""
        return self._cached

    # ------------------------------------------------------------------ fetching
    def _fetch_loop(self) -> None:
        try:
            self._fetch_until_stopped()
        finally:
            with self._cond:
                self._fetcher_done = True
                self._sweeping = False
                self._cond.notify_all()
            self._release_if_idle()

    def _fetch_until_stopped(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while self._cached >= self.max_cached_messages and not self._stopping.is_set():
                    self._cond.wait(0.5)
                if self._stopping.is_set():
                    return
                room = min(self.receive_batch_size, self.max_cached_messages - self._cached)
                self._sweeping = not self._idle
                # Only this thread receives: the long poll is set per call.
                self._consumer.await_duration_s = self._await_s if self._idle else 0
            try:
                messages = self._consumer.receive(room, self.invisible_duration_s)
            except Exception as error:
                with self._cond:
                    self._sweeping = False
                    self._idle = True
                    self._cond.notify_all()
                if self._stopping.is_set():
                    return
                failures += 1
                delay = min(5.0, 0.2 * 2**failures)
                if isinstance(error, MQError):
                    level = logging.ERROR if isinstance(error, NotFoundError) else logging.WARNING
                    log.log(level, "receive failed (%s); retrying in %.1f s", error, delay)
                else:
                    log.exception("receive failed unexpectedly; retrying in %.1f s", delay)
                self._stopping.wait(delay)
                continue
            failures = 0
            self._dispatch(messages)

    def _dispatch(self, messages: list[MessageView]) -> None:
        with self._cond:
            self._sweeping = False
            self._idle = not messages
            late = self._state == "stopped"
            if messages and not late:
                assert self._executor is not None
                self._cached += len(messages)
                self.max_cached_seen = max(self.max_cached_seen, self._cached)
                for message in messages:
                    self._executor.submit(self._consume, message)
            self._cond.notify_all()
        if messages and late:
            self._release(messages)

    def _release(self, messages: list[MessageView]) -> None:
        """Messages fetched after the shutdown: make them visible again soon."""
        if self.invisible_duration_s <= _RELEASE_INVISIBLE_S:
            return
        log.info("shutdown: releasing %d message(s) fetched too late", len(messages))
        for message in messages:
            try:
                self._consumer.change_invisible_duration(message, _RELEASE_INVISIBLE_S)
            except Exception as error:  # it comes back anyway when its invisible time ends
                log.info("could not release message %s: %s", message.message_id, error)

    # ------------------------------------------------------------------ consuming
    def _consume(self, message: MessageView) -> None:
        try:
            with self._cond:
                if self._state == "stopped":
                    return  # shutdown's time was up before it started: redelivered later
            try:
                result = self.listener(message)
            except Exception:
                log.exception("listener failed on message %s", message.message_id)
                result = ConsumeResult.FAILURE
            if result is ConsumeResult.SUCCESS:
                self._succeeded(message)
            else:
                if result is not ConsumeResult.FAILURE:
                    log.warning("listener returned %r, not a ConsumeResult: FAILURE", result)
                self._retry_later(message)
        except Exception:  # never lose the count below
            log.exception("handling message %s failed", message.message_id)
        finally:
            with self._cond:
                self._cached -= 1
                self._cond.notify_all()
            self._release_if_idle()

    def _succeeded(self, message: MessageView) -> None:
        with self._cond:
            late = self._acks_closed
            if not late:
                self._acks.put(message)
        if late:  # the acker is gone (shutdown returned): ack it here
            try:
                self._consumer.ack_batch([message])
            except Exception as error:
                log.warning(
                    "could not ack message %s after shutdown (%s): it will be redelivered",
                    message.message_id,
                    error,
                )

    def _retry_later(self, message: MessageView) -> None:
        attempt = max(1, message.delivery_attempt)
        delay = RETRY_DELAYS_S[min(attempt, len(RETRY_DELAYS_S)) - 1]
        try:
            self._consumer.change_invisible_duration(message, delay)
        except Exception as error:  # it comes back anyway when its invisible time ends
            log.info("could not reschedule message %s: %s", message.message_id, error)

    # ------------------------------------------------------------------ acking
    def _ack_loop(self) -> None:
        stop = False
        failures = 0
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
            if not batch:
                continue
            try:
                self._ack(batch)
            except Exception:  # e.g. the outbox failed while keeping them: redelivered later
                failures += 1
                delay = min(5.0, 0.2 * 2**failures)
                log.exception("acking %d message(s) failed; going on in %.1f s", len(batch), delay)
                self._stopping.wait(delay)
            else:
                failures = 0

    def _ack(self, batch: list[MessageView]) -> None:
        assert self._retrier is not None
        try:
            self._consumer.ack_batch(batch)
        except ReceiptHandleExpiredError as error:
            log.info("%d ack(s) were stale (redelivered meanwhile)", len(error.receipt_handles))
        except MQError as error:
            split = _without_bad_handles(error, batch)
            if split is not None:
                refused, rest = split
                if refused:
                    log.error("ack refused for %d message(s): %s", len(refused), error)
                for part in rest:
                    self._ack(part)
                return
            if not error.retriable:
                log.error("ack refused: %s", error)
                return
            log.warning("ack unreachable (%s): %d kept for retry", error, len(batch))
            self._retrier.park(self.group, handles_of(batch))
        except Exception:
            log.exception("acking %d message(s) failed; kept for retry", len(batch))
            self._retrier.park(self.group, handles_of(batch))


def _without_bad_handles(
    error: MQError, batch: list[MessageView]
) -> tuple[list[MessageView], list[list[MessageView]]] | None:
    """For an ack refused because of malformed or foreign receipt handles: ``(the messages
    refused, the parts of the batch to ack again)``; ``None`` for any other error.

    The service names foreign handles; it does not name a malformed one, which is then found
    by halving the batch.
    """
    if error.code not in _BAD_HANDLE_CODES:
        return None
    named = set(error.details.get("receipt_handles") or ())
    refused = [m for m in batch if m.receipt_handle in named]
    if refused:
        rest = [m for m in batch if m.receipt_handle not in named]
        return refused, [rest] if rest else []
    if len(batch) == 1:
        return batch, []
    middle = len(batch) // 2
    return [], [batch[:middle], batch[middle:]]
