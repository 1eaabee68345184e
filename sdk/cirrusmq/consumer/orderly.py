"""Orderly consumption for :class:`~cirrusmq.PushConsumer` (``orderly=True``).

The service hands out at most one delivery (a batch of one queue) at a time per FIFO queue
and group, and only to the consumer holding the queue's lock. On this side the batches of a
queue run strictly one after the other on one worker at a time (:class:`QueueSerializer`),
while different queues run in parallel on the consumer's thread pool.

A failed message (``FAILURE`` or an exception) suspends its queue for ``suspend_s``; then
its delivery is made visible again at once (change invisible duration 0, which FIFO topics
allow), so the service redelivers that message and the rest of its batch, in order, with
``delivery_attempt`` + 1 — to this consumer, which holds the lock. Successes before it are
acked first. After the group's maximum attempts the service moves the message to the
group's dead-letter topic and the queue goes on; order is never broken silently.

A slow batch keeps its delivery: when less than half of the invisible duration is left, the
successes so far are acked and the whole delivery's invisible time is extended (a change of
invisible duration on a FIFO topic moves the whole lease); a fast batch stays one ack. A
batch whose invisible time has passed before it starts (it waited behind a slow one) is
skipped: the service redelivers it, in order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from ..message import ConsumeResult, MessageView

__all__ = ["BatchLease", "QueueSerializer", "run_orderly_batch"]

log = logging.getLogger("cirrusmq.orderly")


@dataclass
class BatchLease:
    """When (``time.monotonic()``) a delivered batch's invisible time ends on this side
    (measured from before the receive was sent: never later than the service's)."""

    deadline: float
    invisible_s: float


class QueueSerializer:
    """Runs the batches submitted under one key one after the other (keys in parallel)."""

    def __init__(
        self,
        submit: Callable[[Callable[[Hashable], None], Hashable], object],
        run: Callable[[Any], None],
    ) -> None:
        self._submit = submit
        self._run = run
        self._pending: dict[Hashable, deque[Any]] = {}
        self._running: set[Hashable] = set()
        self._lock = threading.Lock()

    def submit(self, key: Hashable, batch: Any) -> None:
        with self._lock:
            waiting = self._pending.get(key)
            if waiting is not None:  # the key's worker is running: it takes this next
                waiting.append(batch)
                return
            self._pending[key] = deque([batch])
        self._submit(self._drain, key)

    def _drain(self, key: Hashable) -> None:
        while True:
            with self._lock:
                waiting = self._pending[key]
                if not waiting:
                    del self._pending[key]
                    self._running.discard(key)
                    return
                batch = waiting.popleft()
                self._running.add(key)
            self._run(batch)

    def waiting(self) -> int:
        """Batches held behind a running batch of their key (fetched, not started)."""
        with self._lock:
            return sum(len(self._pending[key]) for key in self._running)

    def busy(self) -> int:
        """Queues with a batch running or waiting."""
        with self._lock:
            return len(self._pending)


def by_queue(messages: list[MessageView]) -> dict[tuple[str, int], list[MessageView]]:
    """Messages per (topic, queue), each in offset order."""
    grouped: dict[tuple[str, int], list[MessageView]] = {}
    for message in messages:
        grouped.setdefault((message.topic, message.queue), []).append(message)
    for batch in grouped.values():
        batch.sort(key=lambda m: m.offset)
    return grouped


def run_orderly_batch(
    batch: list[MessageView],
    *,
    listener: Callable[[MessageView], ConsumeResult],
    ack: Callable[[list[MessageView]], None],
    retry_now: Callable[[MessageView], None],
    suspend: Callable[[float], object],
    suspend_s: float,
    stopped: Callable[[], bool],
    lease: BatchLease | None = None,
    extend: Callable[[MessageView], bool | None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Process one queue's batch in order; returns how many messages succeeded.

    Stops at the first failure: acks what succeeded before it, waits ``suspend_s``, and has
    the failed message (with the rest of the batch) redelivered. A batch interrupted by a
    shutdown acks what it finished; the rest is redelivered later.

    With ``lease``: before a message, if less than half of the invisible duration is left,
    the successes so far are acked and ``extend(message)`` renews the delivery (True:
    renewed, False: the delivery is stale — stop, the service redelivers the rest —, None:
    unknown, go on); a batch whose lease has run out stops there (a queued batch that
    waited too long is skipped as a whole).
    """
    done = 0
    pending: list[MessageView] = []
    for message in batch:
        if stopped():
            break
        if lease is not None and _renewal_due(lease, clock) and pending:
            ack(pending)  # a slow batch: what is done is acked before the renewal
            pending = []
        if lease is not None and not _keep(lease, message, extend, clock):
            break
        try:
            result = listener(message)
        except Exception:
            log.exception("listener failed on message %s", message.message_id)
            result = ConsumeResult.FAILURE
        if result is ConsumeResult.SUCCESS:
            pending.append(message)
            done += 1
            continue
        if result is not ConsumeResult.FAILURE:
            log.warning("listener returned %r, not a ConsumeResult: FAILURE", result)
        if pending:
            ack(pending)
        suspend(suspend_s)
        retry_now(message)
        return done
    if pending:
        ack(pending)
    return done


def _renewal_due(lease: BatchLease, clock: Callable[[], float]) -> bool:
    return lease.deadline - clock() < lease.invisible_s / 2


def _keep(
    lease: BatchLease,
    message: MessageView,
    extend: Callable[[MessageView], bool | None] | None,
    clock: Callable[[], float],
) -> bool:
    """Whether the batch may go on with ``message`` (renewing its delivery if due)."""
    now = clock()
    if now >= lease.deadline:
        log.warning(
            "orderly batch of queue %s: its invisible time ran out before message %s; "
            "the service redelivers the rest",
            message.queue,
            message.message_id,
        )
        return False
    if extend is None or lease.deadline - now >= lease.invisible_s / 2:
        return True
    renewed = extend(message)
    if renewed is False:
        return False  # redelivered or moved on meanwhile: the fresh delivery runs the rest
    if renewed:
        lease.deadline = now + lease.invisible_s
    return True
