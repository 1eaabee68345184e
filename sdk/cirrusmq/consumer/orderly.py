"""Orderly consumption for :class:`~cirrusmq.PushConsumer` (``orderly=True``).

The service holds a FIFO queue per message group: while a delivery holds a group's messages
unacked, no later message of that group is handed out, but other groups of the same queue
flow (a delivery holding several groups holds them all until it is settled), and only to the
consumer holding the queue's lock. So several deliveries of one queue may be in flight at
once, never two sharing a group. On this side each delivery (the batch of one queue a
receive brought) runs in order on one worker, after every earlier batch sharing one of its
message groups (:class:`GroupSerializer`: a redelivery waits for its stale predecessor);
batches of other groups, of the same queue or not, run in parallel on the consumer's thread
pool. A batch never waits in the client for an unrelated slow group, so its invisible time
is not spent waiting there (it would come back with ``delivery_attempt`` + 1 and, after the
group's maximum attempts, go to the dead-letter topic without any listener failing).

A failed message (``FAILURE`` or an exception) suspends its batch (its groups) for
``suspend_s``; then its delivery is made visible again at once (change invisible duration 0,
which FIFO topics allow), so the service redelivers that message and the rest of its batch,
in order, with ``delivery_attempt`` + 1 — to this consumer, which holds the lock. Successes
before it are acked first. After the group's maximum attempts the service moves the message to the
group's dead-letter topic and its group goes on; order is never broken silently.

A slow batch keeps its delivery: when less than half of the invisible duration is left, the
successes so far are acked and the whole delivery's invisible time is extended (a change of
invisible duration on a FIFO topic moves the whole lease); a fast batch stays one ack. A
batch whose invisible time has passed before it starts (it waited behind a slow batch of its
own groups, or for a free thread) is skipped: the service redelivers it, in order.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from ..message import ConsumeResult, MessageView

__all__ = ["BatchLease", "GroupSerializer", "group_keys", "run_orderly_batch"]

log = logging.getLogger("cirrusmq.orderly")


@dataclass
class BatchLease:
    """When (``time.monotonic()``) a delivered batch's invisible time ends on this side
    (measured from before the receive was sent: never later than the service's)."""

    deadline: float
    invisible_s: float


@dataclass(eq=False)
class _Job:
    keys: frozenset[Hashable]
    batch: Any
    started: bool = False


class GroupSerializer:
    """Runs batches that each hold a set of keys (their message groups): a batch starts once
    every batch submitted before it that shares a key has finished; batches without a key in
    common run in parallel. The earliest unfinished batch is always free to run, so none
    waits forever."""

    def __init__(
        self,
        submit: Callable[[Callable[[_Job], None], _Job], object],
        run: Callable[[Any], None],
    ) -> None:
        self._submit = submit
        self._run = run
        self._queues: dict[Hashable, deque[_Job]] = {}
        """Per key, its unfinished batches in submission order (the running one first)."""
        self._lock = threading.Lock()

    def submit(self, keys: Iterable[Hashable], batch: Any) -> None:
        job = _Job(frozenset(keys), batch)
        with self._lock:
            for key in job.keys:
                self._queues.setdefault(key, deque()).append(job)
            ready = self._take_if_ready(job)
        if ready:
            self._submit(self._execute, job)

    def _take_if_ready(self, job: _Job) -> bool:
        if job.started or any(self._queues[key][0] is not job for key in job.keys):
            return False
        job.started = True
        return True

    def _execute(self, job: _Job) -> None:
        """Run ``job``, then the batches it held back: the first on this worker, the others
        on the pool (here too once the pool is shut down, so every batch is settled)."""
        todo = [job]
        while todo:
            current = todo.pop(0)
            ready: list[_Job] = []
            try:
                self._run(current.batch)
            except Exception:  # the batches it held back run all the same
                log.exception("an orderly batch failed")
            with self._lock:
                for key in current.keys:
                    waiting = self._queues[key]
                    waiting.popleft()
                    if not waiting:
                        del self._queues[key]
                    elif self._take_if_ready(waiting[0]):
                        ready.append(waiting[0])
            todo[:0] = ready[:1]
            for later in ready[1:]:
                try:
                    self._submit(self._execute, later)
                except RuntimeError:  # the pool is shut down
                    todo.append(later)

    def waiting(self) -> int:
        """Batches held behind a running or earlier batch sharing a key (fetched, not
        started)."""
        with self._lock:
            return len({id(j) for q in self._queues.values() for j in q if not j.started})

    def busy(self) -> int:
        """Batches running or waiting."""
        with self._lock:
            return len({id(j) for q in self._queues.values() for j in q})


def group_keys(batch: list[MessageView]) -> set[tuple[str, int, str | None]]:
    """The message groups a batch holds, as (topic, queue, group): the service hands out a
    group's later messages only once these are settled, and redelivers them in order."""
    return {(m.topic, m.queue, m.message_group) for m in batch}


def by_queue(messages: list[MessageView]) -> dict[tuple[Hashable, ...], list[MessageView]]:
    """Messages per delivery: per (topic, queue), each in offset order. A message leased in
    the group's retry topic (a redriven dead letter, shown at its first topic and queue) is
    in a delivery of its own, apart from its queue's: a batch's change of invisible time
    (its retry at once, its renewal) reaches the lease of its first message only."""
    grouped: dict[tuple[Hashable, ...], list[MessageView]] = {}
    for message in messages:
        leased_in = _leased_in(message)
        key = (message.topic, message.queue) if leased_in is None else (
            message.topic, message.queue, leased_in,
        )  # fmt: skip
        grouped.setdefault(key, []).append(message)
    for batch in grouped.values():
        batch.sort(key=lambda m: m.offset)
    return grouped


def _leased_in(message: MessageView) -> str | None:
    """The topic ``message`` is leased in when it is not its own (the group's retry topic),
    as its receipt handle names it: base64url JSON (group, topic, queue, ...), a dot, the
    signature (read here, verified by the service only); None if it is its own topic or
    the handle cannot be read."""
    handle = message.receipt_handle
    if not handle or "." not in handle:
        return None
    payload = handle.split(".", 1)[0]
    try:
        fields = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        topic = fields[1]
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    return topic if isinstance(topic, str) and topic != message.topic else None


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
