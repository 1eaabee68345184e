"""Broadcast consumption: every instance receives every message of its subscriptions.

RocketMQ's ``MessageModel.BROADCASTING``: whatever the other members of the group do, each
consumer instance gets each message (tag filter applied) once, and its offsets are kept on
the instance, not on the service. Built on the read-by-offset path
(:class:`~cirrusmq.consumer.pull.PullConsumer`, one per subscribed topic), not on the group's
leases: nothing is acked, no group state is written.

An idle instance reads each queue of its topics without waiting on the service, then waits
on its own side, longer and longer up to ``max_poll_interval_s`` (as the push consumer does).

Offsets live in SQLite (:class:`~cirrusmq.consumer.offset_store.OffsetStore`) under
``<group>/<instance id>`` (default instance id: the host name; give each instance on one host
its own). They are committed after each batch the listener processed, so a restarted instance
goes on where it stopped; a crash repeats at most the batch in progress. As in RocketMQ's
broadcasting mode, a message the listener fails on is not redelivered (it is logged and
counted in ``failed_messages``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from os import PathLike
from typing import Any

from ..client_transport import client_transport
from ..credentials import Credentials
from ..errors import ClientClosedError, MQError
from ..message import ConsumeResult, FilterExpression, MessageView, normalize_subscriptions
from ..transport import Transport
from .channel import channel_for
from .pacing import IdleWait, PollPacer
from .pull import PullConsumer, default_instance_id
from .push import MessageModel, PushConsumer

__all__ = ["BroadcastConsumer"]

log = logging.getLogger("cirrusmq.broadcast_consumer")


_PUSH_ONLY = frozenset(
    {
        "consume_threads",
        "max_cached_messages",
        "invisible_duration_s",
        "outbox_path",
        # clustering only (group membership, orderly leases): the broadcast loop is one
        # thread reading each queue in order, and nothing is redelivered
        "orderly",
        "heartbeat_interval_s",
        "heartbeat_timeout_s",
        "suspend_s",
    }
)
"""PushConsumer options about leases and its thread pool: no meaning in broadcasting."""


class BroadcastConsumer(PushConsumer, message_model=MessageModel.BROADCASTING):
    """Calls ``listener`` with every message of ``subscriptions``, on one thread.

    ``start()`` begins; ``shutdown()`` lets the batch in progress finish, commits and closes.
    Also a context manager. ``consume_from`` applies to topics this instance has no stored
    offsets for: ``"latest"`` (RocketMQ's default) or ``"earliest"``.

    It takes the :class:`PushConsumer` arguments too (``PushConsumer(...,
    message_model=MessageModel.BROADCASTING)`` builds one): the options about leases, group
    membership and the thread pool have no meaning here and are ignored; ``client_id`` names
    the instance (unless ``instance_id`` is given) and ``receive_batch_size`` sets
    ``max_poll_messages``.
    """

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None,
        group: str,
        subscriptions: Mapping[str, FilterExpression | str] | Iterable[str],
        listener: Callable[[MessageView], ConsumeResult],
        *,
        message_model: MessageModel | str = MessageModel.BROADCASTING,
        instance_id: str | None = None,
        offset_store_path: str | PathLike[str] | None = None,
        consume_from: str = "latest",
        max_poll_messages: int = 32,
        max_poll_interval_s: float = 5.0,
        request_timeout_s: float = 10.0,
        max_attempts: int = 3,
        transport: Transport | None = None,
        client_id: str | None = None,
        receive_batch_size: int | None = None,
        notifications: bool = True,
        **push_options: Any,
    ) -> None:
        if MessageModel(message_model) is not MessageModel.BROADCASTING:
            raise ValueError("a BroadcastConsumer consumes with MessageModel.BROADCASTING")
        unknown = sorted(set(push_options) - _PUSH_ONLY)
        if unknown:
            raise TypeError(f"BroadcastConsumer got unexpected keyword arguments: {unknown}")
        if receive_batch_size is not None:
            max_poll_messages = min(1000, receive_batch_size)
        subs = normalize_subscriptions(subscriptions)
        if not subs:
            raise ValueError("a broadcast consumer needs at least one subscription")
        self.group = group
        self.instance_id = instance_id or client_id or default_instance_id()
        self.listener = listener
        self.max_poll_interval_s = max_poll_interval_s
        """The longest an idle instance waits between two reads (its latency bound)."""
        self._pacer = PollPacer(
            initial_interval_s=min(0.05, max_poll_interval_s), max_interval_s=max_poll_interval_s
        )
        self._transport, self._own_transport = client_transport(
            transport, endpoint, credentials, request_timeout_s, max_attempts
        )
        self._pullers = {
            topic: PullConsumer(
                endpoint,
                credentials,
                group,
                instance_id=self.instance_id,
                offset_store_path=offset_store_path,
                consume_from=consume_from,
                filter_expression=expression,
                max_poll_messages=max_poll_messages,
                transport=self._transport,
            )
            for topic, expression in subs.items()
        }
        self._stop = threading.Event()
        self._wake = threading.Event()
        """Set by a notification or a shutdown: the loop reads again at once."""
        self._idle = IdleWait(
            self._wake,
            channel=(lambda: channel_for(self._transport)) if notifications else None,
            group=group,
            topics=lambda: list(self._pullers),
        )
        self._thread: threading.Thread | None = None
        self._state = "new"
        self._lock = threading.Lock()
        self.consumed_messages = 0
        self.failed_messages = 0
        self._fetch_error: MQError | None = None
        self._cached = 0
        self.last_error: Exception | None = None
        """The last error of any kind in the consume loop (a locked or failing offset
        store, a read...): the loop logs it, backs off and retries."""
        self.errors = 0
        """How many times the consume loop failed and backed off."""

    @property
    def fetch_error(self) -> MQError | None:
        """The last error reading the service (the consumer keeps retrying)."""
        return self._fetch_error

    @property
    def cached_messages(self) -> int:
        """Messages of the batch in progress not yet finished by the listener."""
        return self._cached

    @property
    def alive(self) -> bool:
        """The consume thread is running (False before start and after shutdown)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def subscriptions(self) -> list[str]:
        return list(self._pullers)

    def start(self) -> BroadcastConsumer:
        """Assign every queue of each subscribed topic and start consuming (idempotent)."""
        with self._lock:
            if self._state == "running":
                return self
            if self._state != "new":
                raise ClientClosedError("the broadcast consumer was shut down")
            for topic, puller in self._pullers.items():
                puller.assign(topic)
            self._thread = threading.Thread(
                target=self._run, name=f"cirrusmq-broadcast-{self.group}", daemon=True
            )
            self._state = "running"
        self._thread.start()
        return self

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop after the batch in progress, commit the offsets, release everything."""
        with self._lock:
            if self._state == "stopped":
                return
            running, self._state = self._state == "running", "stopped"
        self._stop.set()
        self._wake.set()
        self._idle.close()
        if running and self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("shutdown: the listener is still running; offsets not committed")
                return
        for puller in self._pullers.values():
            if running:
                puller.commit()
            puller.close()
        if self._own_transport:
            self._transport.close()

    def positions(self, topic: str) -> dict[int, int]:
        """Queue -> next offset this instance reads on ``topic``."""
        puller = self._pullers[topic]
        return {q: puller.position(q) for q in puller.assignment}

    # ------------------------------------------------------------------ the loop
    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            busy = False
            for puller in self._pullers.values():
                if self._stop.is_set():
                    return
                try:
                    messages = puller.poll(0)
                    busy = busy or bool(messages)
                    self._cached = len(messages)
                    for message in messages:
                        self._consume(message)
                        self._cached -= 1
                    puller.commit()  # after the batch: a crash repeats at most this batch
                except Exception as error:  # noqa: BLE001 - the thread must outlive any failure
                    # e.g. SQLite "database is locked" or a full disk on commit: the
                    # positions stay in memory and the next commit saves them
                    self._cached = 0
                    failures += 1
                    self.errors += 1
                    self.last_error = error
                    if isinstance(error, MQError):
                        self._fetch_error = error
                    delay = min(5.0, 0.2 * 2**failures)
                    log.warning("broadcast loop failed (%r); retrying in %.1f s", error, delay)
                    self._stop.wait(delay)
                    continue
                failures = 0
            delay = self._pacer.after_receive(int(busy))
            if delay and self._idle.wait(delay):  # idle: doubles up to max_poll_interval_s,
                self._wake.clear()  # then on the notification channel: woken, read now
                self._pacer.reset()

    def _consume(self, message: MessageView) -> None:
        try:
            result = self.listener(message)
        except Exception:
            log.exception("listener failed on message %s", message.message_id)
            result = ConsumeResult.FAILURE
        if result is ConsumeResult.SUCCESS:
            self.consumed_messages += 1
        else:
            self.failed_messages += 1
            log.warning(
                "broadcast message %s (%s queue %d offset %d) failed; not redelivered",
                message.message_id,
                message.topic,
                message.queue,
                message.offset,
            )
