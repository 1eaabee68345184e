""":class:`PushConsumer`: the SDK receives, a listener processes, the SDK acks.

Three parts: a fetcher thread receives from the subscriptions whenever there is room under
``max_cached_messages`` (flow control: never more messages in memory than that) — without
server-side long polls: after an empty receive it waits on its own side, longer and longer up
to ``max_poll_interval_s`` (:class:`~cirrusmq.consumer.pacing.PollPacer`), which keeps an
idle consumer cheap; a pool of
``consume_threads`` runs the listener; successes ride on the fetcher's next receive (the
service acks them first: one request instead of two) when it comes within ``_ACK_RIDE_S``,
else an acker thread acks them in a request of their own (never later: the lease would
expire and the message come back). A failed
message (``ConsumeResult.FAILURE`` or an exception) is made visible again after a backoff
(10 s, 30 s, 1 min, 2 min, ... like RocketMQ's retry levels) and redelivered with
``delivery_attempt`` + 1. Acks that cannot reach the service are retried until their receipt
expires (in memory, or in the SQLite outbox at ``outbox_path``).

Every push consumer registers with its group and heartbeats in the background (it shows in
``Admin.describe_group``); shutdown deregisters it. With ``orderly=True`` (FIFO topics) each
message group's messages are processed strictly one after the other, groups (of one queue
or of several) in parallel (:mod:`cirrusmq.consumer.orderly`).

Its size (~600 lines): the fetcher, the listener pool and the acker share one lifecycle and one
lock (the cache count, the shutdown order that acks every success before it returns); the
rules it applies live beside it (:mod:`.orderly`, :mod:`.membership`, :mod:`.pacing`,
:mod:`.pending_acks`).
"""

from __future__ import annotations

import enum
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from os import PathLike
from typing import TYPE_CHECKING, Any, ClassVar

from ..credentials import Credentials
from ..errors import (
    ClientClosedError,
    MQError,
    NotFoundError,
    ProducerFencedError,
    ReceiptHandleExpiredError,
    SubscriptionConflictError,
)
from ..message import ConsumeResult, FilterExpression, MessageView, normalize_subscriptions
from ..transport import RetryPolicy, Transport
from .acks import MAX_ACK_HANDLES, handles_of, log_unacked
from .channel import channel_for
from .membership import Heartbeater, new_client_id
from .orderly import BatchLease, GroupSerializer, by_queue, group_keys, run_orderly_batch
from .pacing import IdleWait, PollPacer
from .pending_acks import AckRetrier, make_retrier
from .simple import SimpleConsumer
from .steps import BatchStepListener, StepListener, run_step

if TYPE_CHECKING:
    from ..transaction.exactly_once import ExactlyOnceProducer

__all__ = ["MessageListener", "MessageModel", "PushConsumer"]

log = logging.getLogger("cirrusmq.push_consumer")


class MessageModel(enum.Enum):
    """How a group's members share messages (RocketMQ's ``MessageModel``)."""

    CLUSTERING = "CLUSTERING"
    """Each message goes to one member of the group (the service's leases)."""
    BROADCASTING = "BROADCASTING"
    """Each member gets every message (offsets kept by each member)."""


MessageListener = Callable[[MessageView], ConsumeResult]
"""Processes one message; returns ``SUCCESS`` or ``FAILURE`` (raising counts as FAILURE)."""

RETRY_DELAYS_S = (10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
"""How long a failed message stays invisible, by delivery attempt (RocketMQ's levels)."""

_ACK_BATCH = 256
_ACK_LINGER_S = 0.05
_ACK_RIDE_S = 0.5
"""The longest a success waits for the fetcher's next receive to carry its ack (a fraction
of the shortest invisible time, 10 s); then the acker sends it on its own."""
_RIDE = object()
"""Acker queue marker: successes wait in ``_riding``."""
_RELEASE_INVISIBLE_S = 10
"""The shortest invisible duration the service takes: a message fetched too late comes back
after it."""
_INITIAL_POLL_INTERVAL_S = 0.05


def _backoff_s(message: MessageView) -> int:
    """How long a failed message stays away (by its delivery attempt)."""
    attempt = max(1, message.delivery_attempt)
    return RETRY_DELAYS_S[min(attempt, len(RETRY_DELAYS_S)) - 1]


@dataclass(frozen=True)
class _Nack:
    """A failed message queued for the acker's next nack request."""

    message: MessageView


class PushConsumer:
    """Delivers messages to ``listener`` on a thread pool, acking what it processed.

    ``start()`` begins fetching; ``shutdown(timeout_s)`` stops fetching, lets the listeners
    finish the messages already fetched (within the timeout), and acks every success before
    it returns. Messages not processed by then are not acked: the service delivers them again
    once their invisible duration ends — nothing is lost. Also a context manager.
    """

    _by_model: ClassVar[dict[MessageModel, type[PushConsumer]]] = {}
    """The class of each message model (:class:`PushConsumer` itself: clustering)."""

    def __init_subclass__(cls, message_model: MessageModel | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if message_model is not None:
            PushConsumer._by_model[message_model] = cls

    def __new__(cls, *args: Any, message_model: Any = None, **options: Any) -> PushConsumer:
        """``PushConsumer(..., message_model=MessageModel.BROADCASTING)`` is a
        :class:`~cirrusmq.consumer.broadcast.BroadcastConsumer`, the push consumer whose
        every instance gets every message (RocketMQ's ``setMessageModel(BROADCASTING)``)."""
        model = MessageModel(message_model or MessageModel.CLUSTERING)
        if cls is PushConsumer and model is not MessageModel.CLUSTERING:
            cls = PushConsumer._by_model[model]
        return super().__new__(cls)

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str] | Iterable[str],
        listener: MessageListener | StepListener | BatchStepListener,
        *,
        message_model: MessageModel | str = MessageModel.CLUSTERING,
        consume_threads: int = 8,
        max_cached_messages: int = 1024,
        receive_batch_size: int = 32,
        invisible_duration_s: int = 60,
        max_poll_interval_s: float = 10.0,
        request_timeout_s: float = 10.0,
        max_attempts: int = 3,
        outbox_path: str | PathLike[str] | None = None,
        transport: Transport | None = None,
        orderly: bool = False,
        client_id: str | None = None,
        heartbeat_interval_s: float | None = 10.0,
        heartbeat_timeout_s: int = 120,
        suspend_s: float = 1.0,
        notifications: bool = True,
        exactly_once: ExactlyOnceProducer | None = None,
        step_per_batch: bool = False,
    ) -> None:
        """``exactly_once``: the listener is called ``listener(message, step)`` with an
        open step of that producer acking the message, and a success commits the step instead
        of acking (:mod:`cirrusmq.consumer.steps`); with ``step_per_batch`` it is called
        ``listener(messages, step)`` once per delivered batch (a receive's messages, or
        orderly: one queue's), all acked by that one step.
        ``notifications``: once idle, wait on the service's notification channel instead
        of polling (docs/notifications.md; False: always poll).
        ``orderly``: per-message-group sequential processing (FIFO topics); a failing
        listener suspends its batch's groups ``suspend_s`` and the same message comes back
        (attempt + 1).
        ``client_id`` names this instance in its group (default: host@pid@random); it
        heartbeats every ``heartbeat_interval_s`` (None: never registers) and is removed
        once silent for ``heartbeat_timeout_s`` (5-3600)."""
        if consume_threads < 1 or max_cached_messages < 1:
            raise ValueError("consume_threads and max_cached_messages must be at least 1")
        if heartbeat_interval_s is not None and heartbeat_interval_s <= 0:
            raise ValueError("heartbeat_interval_s must be positive (or None: no registration)")
        if heartbeat_interval_s is not None and heartbeat_timeout_s < heartbeat_interval_s:
            raise ValueError(
                "heartbeat_timeout_s must not be shorter than heartbeat_interval_s (the "
                "consumer would be removed between two heartbeats)"
            )
        if suspend_s < 0:
            raise ValueError("suspend_s must not be negative")
        if step_per_batch and exactly_once is None:
            raise ValueError("step_per_batch needs an exactly_once producer")
        subscriptions = normalize_subscriptions(subscriptions)
        if not subscriptions:
            raise ValueError("a push consumer needs at least one subscription")
        self._pacer = PollPacer(
            initial_interval_s=min(_INITIAL_POLL_INTERVAL_S, max_poll_interval_s),
            max_interval_s=max_poll_interval_s,
        )
        self.max_poll_interval_s = max_poll_interval_s
        """The longest an idle consumer waits between two receives (its latency bound)."""
        self.group = group
        self.listener = listener
        self.exactly_once = exactly_once
        self.step_per_batch = step_per_batch
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
            0,  # never a server-side long poll: the pacer waits on this side
            transport=self._transport,
        )
        self._outbox_path = outbox_path
        # group membership (heartbeats) and orderly consumption
        self.orderly = orderly
        self.client_id = client_id or new_client_id()
        self.suspend_s = suspend_s
        self._consumer.client_id = self.client_id
        self._wake = threading.Event()
        """Set when an orderly queue finished a batch or a notification came: the fetcher
        polls again at once."""
        self._idle = IdleWait(
            self._wake,
            channel=(lambda: channel_for(self._transport)) if notifications else None,
            group=group,
            topics=lambda: list(self._consumer.subscriptions),
        )
        # an empty receive's hint (another consumer's lease, a retry's backoff) ends the wait
        self._consumer.due_listener = self._idle.expect_at
        self._heartbeater = (
            Heartbeater(
                self._transport,
                group,
                self.client_id,
                lambda: self._consumer.subscriptions,
                orderly=orderly,
                interval_s=heartbeat_interval_s,
                timeout_s=heartbeat_timeout_s,
                on_new_queues=self._wake.set,  # their backlog: receive now
            )
            if heartbeat_interval_s is not None
            else None
        )
        self._serializer: GroupSerializer | None = None
        # --- end registration
        self._cond = threading.Condition()
        self._cached = 0
        self._state = "new"  # new -> running -> stopping -> stopped
        self._stopping = threading.Event()
        self._acks: queue.SimpleQueue[MessageView | _Nack | None] = queue.SimpleQueue()
        self._acks_closed = False
        """The acker took its stop marker: later successes are acked directly."""
        self._riding: list[MessageView] = []
        """Successes waiting to ride on the next receive (the acker takes them after
        ``_ACK_RIDE_S``)."""
        self._ride_signalled = False
        """A ``_RIDE`` marker is queued for the successes in ``_riding``."""
        self._carried: list[MessageView] = []
        """The successes the receive in progress carries. Whoever takes them from here acks
        them on their own: the fetcher if the service did not ack them, the acker if it
        stops (shutdown) before that receive ended."""
        self._sweeping = False
        """A receive is in progress (shutdown waits for it: it does not wait on the server)."""
        self._fetch_error: MQError | None = None
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
            if self.orderly:
                self._serializer = GroupSerializer(self._executor.submit, self._consume_batch)
            self._threads = [
                threading.Thread(target=self._fetch_loop, name="cirrusmq-fetch", daemon=True),
                threading.Thread(target=self._ack_loop, name="cirrusmq-ack", daemon=True),
            ]
            self._state = "running"
        if self._heartbeater is not None:
            self._heartbeater.start()  # registered (queues allocated) before the first receive
        for thread in self._threads:
            thread.start()
        return self

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop fetching, wait for the listeners (up to ``timeout_s``), ack the successes.

        The fetcher's receives never wait on the server: a receive in progress is waited for
        (within ``timeout_s``) and its messages processed; an idle consumer's wait between
        receives ends at once. Messages a receive brings after the time is up are released
        (visible again after 10 s, the service's minimum). Listeners still running when the
        time is up finish in the background and their successes are still acked; the
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
        self._wake.set()
        self._idle.close()  # no more registrations: the shared channel may close
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
        if self._heartbeater is not None:
            self._heartbeater.stop()  # deregisters: its queue locks are released at once
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
    def fetch_error(self) -> MQError | None:
        """The error that stopped fetching for good, e.g. a
        :class:`~cirrusmq.errors.SubscriptionConflictError`, or the
        :class:`~cirrusmq.errors.ProducerFencedError` of the ``exactly_once`` producer, or
        its :class:`~cirrusmq.errors.ClientClosedError` once it was closed (``None`` while all
        is well)."""
        return self._fetch_error

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
                if self._stopping.is_set() or self._fetch_error is not None:
                    return
                room = min(self.receive_batch_size, self.max_cached_messages - self._cached)
                self._sweeping = True
            fetched_at = time.monotonic()  # the delivery's invisible time ends after this
            riding = self._take_riding()
            with self._cond:
                self._carried = riding
            try:
                messages = self._receive_carrying(riding, room)
            except Exception as error:
                self._ack_carried()  # their fate is unknown: acked on their own (twice is fine)
                with self._cond:
                    self._sweeping = False
                    self._cond.notify_all()
                if isinstance(error, SubscriptionConflictError):
                    log.error(
                        "group %s: fetching stopped: %s (the group is subscribed to %s with "
                        "%r, this consumer asked for %r); change the group's subscription with "
                        "Admin.subscribe() or `cirrusmq group subscribe`, or use the recorded "
                        "filter",
                        self.group,
                        error,
                        error.topic,
                        error.subscribed,
                        error.requested,
                    )
                    self._fetch_error = error
                    return
                self._pacer.reset()
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
            delay = self._pacer.after_receive(len(messages))
            self._dispatch(messages, fetched_at + self.invisible_duration_s)
            if delay and self._idle.wait(delay):  # idle: a shutdown ends the wait at once
                self._wake.clear()  # an orderly queue is free again: poll now
                self._pacer.reset()

    def _take_riding(self) -> list[MessageView]:
        """The successes the next receive carries (at most one ack request's worth)."""
        with self._cond:
            riding, self._riding = self._riding[:MAX_ACK_HANDLES], self._riding[MAX_ACK_HANDLES:]
            if not self._riding:
                self._ride_signalled = False  # a later success queues a marker again
            return riding

    def _receive_carrying(self, riding: list[MessageView], room: int) -> list[MessageView]:
        """Receive up to ``room`` messages, the receive acking ``riding`` first; results
        handled as the acker's (a service that did not ack them: acked on their own)."""
        if not riding:
            return self._consumer.receive(room, self.invisible_duration_s)
        call = self._consumer._riding_plan(riding)
        try:
            results, messages = self._consumer._receive(room, self.invisible_duration_s, call)
        except MQError as error:
            if not self._consumer._may_refuse_riding(error):
                raise
            # apart, the acks and the receive each meet their own mistake; only if both go
            # through was it the service refusing acks on receives
            answered = self._ack_carried()
            messages = self._consumer.receive(room, self.invisible_duration_s)
            if answered:
                self._consumer._stop_riding(error)
            return messages
        if results is None:
            self._ack_carried()
        else:
            with self._cond:
                self._carried = []  # settled by the receive
            log_unacked(results, self.group)
        return messages

    def _ack_carried(self) -> bool:
        """Ack on their own the successes the receive carried, unless the acker took them
        (stopping); whether the service answered (:meth:`_ack`; True with none left)."""
        with self._cond:
            carried, self._carried = self._carried, []
        return self._ack(carried) if carried else True

    def _dispatch(self, messages: list[MessageView], deadline: float | None = None) -> None:
        with self._cond:
            self._sweeping = False
            late = self._state == "stopped"
            if messages and not late:
                assert self._executor is not None
                self._cached += len(messages)
                self.max_cached_seen = max(self.max_cached_seen, self._cached)
                if self._serializer is not None:  # orderly: one worker at a time per group
                    for batch in by_queue(messages).values():
                        lease = BatchLease(
                            deadline if deadline is not None else math.inf,
                            self.invisible_duration_s,
                        )
                        self._serializer.submit(group_keys(batch), (batch, lease))
                elif self.step_per_batch:
                    self._executor.submit(self._consume_messages, messages)
                else:
                    for message in messages:
                        self._executor.submit(self._consume_messages, [message])
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
    def _consume_messages(self, messages: list[MessageView]) -> None:
        """One message, or with ``step_per_batch`` one receive's messages."""
        try:
            with self._cond:
                if self._state == "stopped":
                    return  # shutdown's time was up before it started: redelivered later
            if self.exactly_once is not None:
                if self._run_step(messages) is ConsumeResult.FAILURE:
                    for message in messages:
                        self._retry_later(message)
                return  # a success was acked by its step's commit
            [message] = messages
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
            log.exception("handling %d message(s) failed", len(messages))
        finally:
            with self._cond:
                self._cached -= len(messages)
                self._cond.notify_all()
            self._release_if_idle()

    def _run_step(self, messages: list[MessageView]) -> ConsumeResult:
        """The listener inside a step acking ``messages`` (SUCCESS: committed)."""
        assert self.exactly_once is not None
        argument = messages if self.step_per_batch else messages[0]
        try:
            return run_step(self.exactly_once, self, messages, self.listener, argument)
        except (ProducerFencedError, ClientClosedError) as error:  # no step can commit
            with self._cond:
                if self._fetch_error is None:
                    log.error(
                        "group %s: fetching stopped: the exactly-once producer is fenced or "
                        "closed (%s)",
                        self.group,
                        error,
                    )
                    self._fetch_error = error
                self._cond.notify_all()
            self._wake.set()
            return ConsumeResult.FAILURE

    def _consume_batch(self, item: tuple[list[MessageView], BatchLease]) -> None:
        """Orderly: one queue's batch, in order (see :mod:`cirrusmq.consumer.orderly`)."""
        batch, lease = item
        stepped = self.exactly_once is not None
        try:
            if self.step_per_batch:
                self._consume_step_batch(batch, lease)
                return
            run_orderly_batch(
                batch,
                listener=(lambda m: self._run_step([m])) if stepped else self.listener,
                ack=(lambda _: None) if stepped else self._ack_now,  # a commit acked each
                retry_now=self._retry_now,
                suspend=self._stopping.wait,
                suspend_s=self.suspend_s,
                stopped=lambda: self._state == "stopped",
                lease=lease,
                extend=self._extend,
            )
        except Exception:  # never lose the count below
            log.exception("handling a batch of queue %s failed", batch[0].queue)
        finally:
            with self._cond:
                self._cached -= len(batch)
                self._cond.notify_all()
            self._wake.set()
            self._release_if_idle()

    def _consume_step_batch(self, batch: list[MessageView], lease: BatchLease) -> None:
        """Orderly, one step per batch: committed whole, or suspended and redelivered
        whole (``delivery_attempt`` + 1). A batch whose lease ran out before it started is
        skipped: the service redelivers it."""
        if self._state == "stopped" or time.monotonic() >= lease.deadline:
            return
        if self._run_step(batch) is ConsumeResult.FAILURE:
            self._stopping.wait(self.suspend_s)
            self._retry_now(batch[0])

    def _ack_now(self, messages: list[MessageView]) -> None:
        """Orderly: ack before the queue's next delivery can come."""
        try:
            self._ack(messages)
        except Exception:  # redelivered after the invisible duration: repeats, in order
            log.exception("acking %d message(s) failed", len(messages))

    def _extend(self, message: MessageView) -> bool | None:
        """Orderly: renew a slow batch's delivery (FIFO: the whole lease moves); False if
        the delivery is stale, None if the service could not be asked."""
        try:
            self._consumer.change_invisible_duration(message, self.invisible_duration_s)
        except ReceiptHandleExpiredError:
            return False
        except Exception as error:  # it may still end in time: go on
            log.info("could not extend the delivery of queue %s: %s", message.queue, error)
            return None
        return True

    def _retry_now(self, message: MessageView) -> None:
        """Orderly: the failed message and the rest of its delivery come back at once."""
        try:
            self._consumer.change_invisible_duration(message, 0)
        except Exception as error:  # it comes back anyway when its invisible time ends
            log.info("could not release message %s: %s", message.message_id, error)

    def _succeeded(self, message: MessageView) -> None:
        with self._cond:
            late = self._acks_closed
            if not late:
                self._riding.append(message)
                if not self._ride_signalled:
                    self._ride_signalled = True
                    self._acks.put(_RIDE)
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
        """A failed message goes back with the acks' batches (one nack request for many)."""
        # it comes back after its backoff, which no notification announces
        self._idle.expect_at(time.monotonic() + _backoff_s(message))
        with self._cond:
            late = self._acks_closed
            if not late:
                self._acks.put(_Nack(message))
        if late:  # the acker is gone (shutdown returned): nack it here
            self._nack_now([message])

    def _nack_now(self, messages: list[MessageView]) -> None:
        try:  # the service redelivers them on its backoff schedule (or dead-letters them)
            results = self._consumer.nack_batch(messages)
        except Exception as error:  # an older service, or unreachable: the old way
            log.info("could not nack %d message(s) (%s): rescheduling", len(messages), error)
            for message in messages:
                self._reschedule(message)
            return
        log_unacked(results, self.group, what="nack")

    def _reschedule(self, message: MessageView) -> None:
        try:
            self._consumer.change_invisible_duration(message, _backoff_s(message))
        except Exception as error:  # it comes back anyway when its invisible time ends
            log.info("could not reschedule message %s: %s", message.message_id, error)

    # ------------------------------------------------------------------ acking
    def _ack_loop(self) -> None:
        stop = False
        failures = 0
        while not stop:
            item = self._acks.get()
            batch: list[Any] = []
            rides = False
            deadline = time.monotonic() + _ACK_LINGER_S
            while True:
                if item is None:
                    stop = True
                elif item is _RIDE:
                    rides = True
                else:
                    batch.append(item)
                if stop or len(batch) >= _ACK_BATCH:
                    break
                try:
                    item = self._acks.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
            nacks = [item.message for item in batch if isinstance(item, _Nack)]
            batch = [item for item in batch if not isinstance(item, _Nack)]
            if nacks:
                self._nack_now(nacks)
            if rides or stop:  # what no receive carried within _ACK_RIDE_S goes on its own
                if rides and not stop:
                    self._stopping.wait(_ACK_RIDE_S)
                while left := self._take_riding():
                    batch += left
            if stop:  # a receive shutdown did not wait for: its acks too (twice is fine)
                with self._cond:
                    batch += self._carried
                    self._carried = []
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

    def _ack(self, batch: list[MessageView]) -> bool:
        """Ack a batch: acked, expired and invalid handles are done (the last two logged and
        dropped); a batch the service cannot take now is kept for retry. Returns whether the
        service answered the ack."""
        assert self._retrier is not None
        try:
            results = self._consumer.ack_batch(batch)
        except MQError as error:
            if not error.retriable:
                log.error("ack refused: %s", error)
                return False
            log.warning("ack unreachable (%s): %d kept for retry", error, len(batch))
            self._retrier.park(self.group, handles_of(batch))
        except Exception:
            log.exception("acking %d message(s) failed; kept for retry", len(batch))
            self._retrier.park(self.group, handles_of(batch))
        else:
            log_unacked(results, self.group)
            return all(r.final for r in results)  # none kept in the outbox for a retry
        return False
