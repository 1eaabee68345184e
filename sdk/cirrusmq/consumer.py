""":class:`SimpleConsumer`: receive, ack, change invisible duration — the consumer drives.

Also the pieces the other consumers share: :class:`ConsumerBase` (what the threaded and the
asyncio simple consumers have in common), the receive plan over several subscriptions
(:func:`receive_steps`, written once for threads and asyncio), ack bookkeeping (per-handle
results, :mod:`.acks`), and :class:`AckRetrier`, which keeps acks that could not reach the
service and retries them until their receipt handles expire.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import threading
import time
from collections.abc import Generator, Iterable, Mapping
from datetime import timedelta
from os import PathLike
from typing import Any
from urllib.parse import quote

from .acks import AckReply, AckResult, AckStatus, ack_plan, is_per_handle_error
from .credentials import Credentials
from .errors import ClientClosedError, MQError
from .message import (
    FilterExpression,
    MessageView,
    normalize_subscriptions,
    parse_receive_response,
)
from .outbox import MemoryOutbox, Outbox, SqliteOutbox
from .transport import RetryPolicy, Transport
from .wire import read_optional_int, read_str

__all__ = ["AckRetrier", "ConsumerBase", "SimpleConsumer"]

log = logging.getLogger("cirrusmq.consumer")

MAX_WAIT_S = 20
_ONE_ATTEMPT = RetryPolicy(max_attempts=1)
_UNKNOWN_EXPIRY_S = 12 * 3600
"""How long an ack of a bare receipt handle (no ``invisible_until`` known) is retried."""

ReceiveRequest = tuple[str, dict[str, Any], float]
"""(topic, JSON body, seconds the service may wait)."""


def seconds(value: float | timedelta) -> float:
    """A duration given as seconds or a ``timedelta``, in seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def group_path(group: str, action: str = "") -> str:
    path = f"/v1/groups/{quote(group, safe='')}"
    return f"{path}/{action}" if action else path


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
            "filter": subscriptions[topic].expression,
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


class AckRetrier:
    """Retries acks that failed for want of the service, until their receipt handles expire.

    Pending acks live in an :class:`~cirrusmq.outbox.Outbox` (durable with a SQLite one, so
    they survive a restart). A background thread retries them every ``interval_s``.
    """

    def __init__(self, store: Outbox, transport: Transport, *, interval_s: float = 2.0) -> None:
        self.store = store
        self._transport = transport
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        if store.stats().acks:
            self._ensure_thread()

    def park(self, group: str, handles: Iterable[tuple[str, int]]) -> None:
        """Keep ``(receipt_handle, expires_ms)`` pairs of ``group`` for retrying."""
        self.store.add_acks(group, handles)
        self._ensure_thread()

    def pending(self) -> int:
        """How many acks wait."""
        return self.store.stats().acks

    def retry_now(self) -> None:
        """Wake the retry thread at once."""
        self._wake.set()

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="cirrusmq-ack-retry", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.flush_once()
            except Exception:  # pragma: no cover - keep retrying, loudly
                log.exception("retrying pending acks failed")

    def flush_once(self) -> None:
        """Try every pending ack once. Acked, expired and invalid handles are done (the last
        two are logged and dropped); acks the service cannot take now wait for the next try."""
        pending = self.store.claim_acks(now_ms=int(time.time() * 1000))
        by_group: dict[str, list] = {}
        for ack in pending:
            by_group.setdefault(ack.group, []).append(ack)
        for group, acks in by_group.items():
            ids = {a.receipt_handle: a.ack_id for a in acks}
            steps = ack_plan(list(ids))
            try:
                chunk = next(steps)
                while True:
                    reply: AckReply
                    try:
                        reply = self._transport.request(
                            "POST",
                            group_path(group, "ack"),
                            json_body={"receipt_handles": chunk},
                            retry=_ONE_ATTEMPT,
                        )
                    except MQError as error:
                        if not is_per_handle_error(error):
                            raise
                        reply = error
                    chunk = steps.send(reply)
            except StopIteration as done:
                log_unacked(done.value, group, what="pending acks")
                self.store.remove_acks([ids[r.receipt_handle] for r in done.value])
            except MQError as error:
                if error.retriable:
                    self.store.release_acks([a.ack_id for a in acks])
                else:
                    log.error("dropping %d pending ack(s) of %s: %s", len(acks), group, error)
                    self.store.remove_acks([a.ack_id for a in acks])

    def close(self) -> None:
        """Stop retrying (pending acks stay in a durable store)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.store.close()


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
        self, max_message_num: int, invisible_duration: float | timedelta
    ) -> Generator[ReceiveRequest, list[MessageView], list[MessageView]]:
        self._check_open()
        return receive_steps(
            self._subscriptions,
            start=next(self._rotation),
            max_messages=max_message_num,
            invisible_s=int(seconds(invisible_duration)),
            await_s=self.await_duration_s,
            client_id=self.client_id,
        )

    def _ack_plan(self, messages: Iterable[MessageView | str]) -> _AckCall:
        self._check_open()
        return _AckCall(list(messages))

    def _ack_failed(self, error: MQError, chunk: list[str], call: _AckCall) -> AckReply:
        """What to send the ack plan after ``error``; raises the errors it cannot handle. With
        an outbox, acks the service cannot take now are kept for a retry (``PENDING``)."""
        if is_per_handle_error(error):
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
        self.message_ids = {
            m.receipt_handle: m.message_id for m in messages if isinstance(m, MessageView)
        }
        self.steps = ack_plan([h for h, _ in pairs])

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
    ) -> None:
        super().__init__(endpoint, credentials, group, subscriptions, await_duration)
        self._own_transport = transport is None
        self._transport = transport or Transport(
            endpoint,
            credentials,
            request_timeout_s=request_timeout_s,
            retry=RetryPolicy(max_attempts=max_attempts),
        )
        self._retrier = make_retrier(self._transport, outbox_path) if outbox_path else None

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def receive(
        self, max_message_num: int = 32, invisible_duration: float | timedelta = 60
    ) -> list[MessageView]:
        """Up to ``max_message_num`` messages (1-1000), waiting up to ``await_duration``."""
        steps = self._receive_plan(max_message_num, invisible_duration)
        try:
            _, body, wait_s = next(steps)
            while True:
                response = self._transport.request(
                    "POST",
                    group_path(self.group, "receive"),
                    json_body=body,
                    timeout_s=self._transport.request_timeout_s + wait_s,
                )
                messages = parse_receive_response(response)
                _, body, wait_s = steps.send(messages)
        except StopIteration as done:
            return done.value

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

    # ---------------------------------------------------------------- nack (issue 9)
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
        from .nacks import nack_requests, nack_results

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
        if self._own_transport:
            self._transport.close()


def make_retrier(transport: Transport, outbox_path: str | PathLike[str] | None) -> AckRetrier:
    """An :class:`AckRetrier` on a SQLite outbox at ``outbox_path``, else in memory."""
    store: Outbox = SqliteOutbox(outbox_path) if outbox_path else MemoryOutbox()
    return AckRetrier(store, transport)
