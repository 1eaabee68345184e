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
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable

from .message import ConsumeResult, MessageView

__all__ = ["QueueSerializer", "run_orderly_batch"]

log = logging.getLogger("cirrusmq.orderly")


class QueueSerializer:
    """Runs the batches submitted under one key one after the other (keys in parallel)."""

    def __init__(
        self,
        submit: Callable[[Callable[[Hashable], None], Hashable], object],
        run: Callable[[list[MessageView]], None],
    ) -> None:
        self._submit = submit
        self._run = run
        self._pending: dict[Hashable, deque[list[MessageView]]] = {}
        self._lock = threading.Lock()

    def submit(self, key: Hashable, batch: list[MessageView]) -> None:
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
                    return
                batch = waiting.popleft()
            self._run(batch)

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
) -> int:
    """Process one queue's batch in order; returns how many messages succeeded.

    Stops at the first failure: acks what succeeded before it, waits ``suspend_s``, and has
    the failed message (with the rest of the batch) redelivered. A batch interrupted by a
    shutdown acks what it finished; the rest is redelivered later.
    """
    done: list[MessageView] = []
    for message in batch:
        if stopped():
            break
        try:
            result = listener(message)
        except Exception:
            log.exception("listener failed on message %s", message.message_id)
            result = ConsumeResult.FAILURE
        if result is ConsumeResult.SUCCESS:
            done.append(message)
            continue
        if result is not ConsumeResult.FAILURE:
            log.warning("listener returned %r, not a ConsumeResult: FAILURE", result)
        if done:
            ack(done)
        suspend(suspend_s)
        retry_now(message)
        return len(done)
    if done:
        ack(done)
    return len(done)
