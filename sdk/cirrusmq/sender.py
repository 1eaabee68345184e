"""The producers' bookkeeping, without I/O scheduling or locks (shared by both producers).

:class:`SendState` owns the accumulator and the outbox and decides what happens next: which
batches to seal, which to post, what a success or a failure means for the waiting callers.
:class:`~cirrusmq.producer.Producer` drives it from threads (under its lock) and
:class:`~cirrusmq.aio.AsyncProducer` from an event loop.

Ordering: a topic has at most one batch in flight (the outbox's head of that topic), so its
batches — and the messages of each message group — are stored in the order they were sealed.
A batch that fails with a retriable error after the full retry policy is *parked* when the
outbox is durable: it stays the head of its topic and is resent (same producer id and
sequence: the service stores it once) with a growing delay; new batches of a parked topic are
sealed straight into the outbox. Without a durable outbox, the batch's messages fail instead.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from .accumulator import REQUEST_OVERHEAD_BYTES, Accumulator, PendingMessage, encode_request
from .errors import MQError, OutboxFullError, PayloadTooLargeError
from .message import Message, SendReceipt, new_message_id
from .outbox import Outbox, OutboxBatch, OutboxEntry
from .transport import RetryPolicy

__all__ = ["MAX_REQUEST_BYTES", "SendState", "Ticket", "prepare", "validate_options"]

log = logging.getLogger("cirrusmq.producer")

MAX_REQUEST_BYTES = 6 * 1024 * 1024
"""The service's request limit."""
ONE_ATTEMPT = RetryPolicy(max_attempts=1)


class Ticket(Protocol):
    """What a producer keeps for one caller's message."""

    message: Message
    message_id: str

    def park(self) -> None:
        """The message waits in the durable outbox (a blocking sender may return)."""


def validate_options(
    *, linger_ms: float, max_batch_messages: int, max_batch_bytes: int, request_timeout_s: float
) -> None:
    if not 1 <= max_batch_messages <= 1000:
        raise ValueError("max_batch_messages must be 1-1000 (the service's limit)")
    if not REQUEST_OVERHEAD_BYTES < max_batch_bytes <= MAX_REQUEST_BYTES:
        raise ValueError(f"max_batch_bytes must be at most {MAX_REQUEST_BYTES}")
    if linger_ms < 0 or request_timeout_s <= 0:
        raise ValueError("linger_ms must be >= 0 and request_timeout_s > 0")


def prepare(message: Message, born_ms: int) -> tuple[str, dict[str, Any], int]:
    """``(message_id, wire form, JSON size)`` of a message about to be queued."""
    message_id = new_message_id()
    wire = message.to_wire(message_id, born_ms)
    size = len(json.dumps(wire, separators=(",", ":")))
    if size + REQUEST_OVERHEAD_BYTES > MAX_REQUEST_BYTES:
        raise PayloadTooLargeError(f"a message of {size} bytes (JSON) does not fit in a request")
    return message_id, wire, size


def receipts_of(batch: OutboxBatch, body: Any) -> dict[str, SendReceipt]:
    return {
        r["message_id"]: SendReceipt(r["message_id"], batch.topic, r["queue"], r["offset"])
        for r in (body or {}).get("receipts", [])
    }


class SendState:
    """Accumulator + outbox + who waits for what. Not thread-safe: callers serialize."""

    def __init__(
        self,
        *,
        producer_id: str,
        store: Outbox,
        accumulator: Accumulator,
        retry: RetryPolicy,
        max_messages: int,
        max_bytes: int,
        outbox_retry_max_s: float,
    ) -> None:
        self.producer_id = producer_id
        self.store = store
        self.acc = accumulator
        self.retry = retry
        self.max_messages = max_messages
        self.max_bytes = max_bytes
        self.outbox_retry_max_s = outbox_retry_max_s
        self._sequence = 0
        self._tickets: dict[int, tuple[str, list[Ticket]]] = {}
        self._stored_by_topic: Counter[str] = Counter()
        self._inflight: set[str] = set()
        self._parked: dict[str, tuple[float, int]] = {}
        """Topic -> (monotonic time of the next resend, failed resends so far)."""
        self.buffered_messages = 0
        self.buffered_bytes = 0
        for topic, (batches, messages, size) in store.topic_counts().items():
            self._stored_by_topic[topic] = batches
            self.buffered_messages += messages
            self.buffered_bytes += size

    # ------------------------------------------------------------------ intake
    def has_room(self, count: int, size: int) -> bool:
        return self.buffered_messages == 0 or (
            self.buffered_messages + count <= self.max_messages
            and self.buffered_bytes + size <= self.max_bytes
        )

    def full_error(self) -> OutboxFullError:
        where = "outbox" if self.store.durable else "send buffer"
        return OutboxFullError(
            f"the {where} holds {self.buffered_messages} message(s) / {self.buffered_bytes} "
            f"bytes (bounds: {self.max_messages} / {self.max_bytes})"
        )

    def add(self, items: Sequence[tuple[Ticket, PendingMessage]], *, urgent: bool) -> bool:
        """Queue messages; True when the sender should look again."""
        wake = False
        for ticket, pending in items:
            wake |= self.acc.add(ticket.message.topic, pending, urgent=urgent)
            self.buffered_messages += 1
            self.buffered_bytes += pending.size
        return wake

    # ------------------------------------------------------------------ sealing, claiming
    def busy_topics(self) -> set[str]:
        """Topics whose open batch keeps growing: one of their batches is queued or in flight
        (parked topics excepted: their new batches go to the outbox at once)."""
        return {t for t, n in self._stored_by_topic.items() if n and t not in self._parked}

    def seal_due(self, *, everything: bool = False) -> None:
        """Seal the due batches into the outbox, each with the next sequence."""
        for batch in self.acc.due(busy_topics=self.busy_topics(), everything=everything):
            sequence, self._sequence = self._sequence, self._sequence + 1
            payload = encode_request(self.producer_id, sequence, batch)
            entry = self.store.append(
                OutboxBatch(
                    batch.topic,
                    self.producer_id,
                    sequence,
                    tuple(m.message_id for m in batch.messages),
                    payload,
                )
            )
            tickets: list[Ticket] = [m.ticket for m in batch.messages]
            self._tickets[entry.entry_id] = (batch.topic, tickets)
            self._stored_by_topic[batch.topic] += 1
            # From here on the request counts, not its parts.
            self.buffered_bytes += len(payload) - sum(m.size for m in batch.messages)
            if batch.topic in self._parked:
                for ticket in tickets:
                    ticket.park()

    def claim(self) -> list[tuple[OutboxEntry, RetryPolicy]]:
        """The head batches to post now, each with the retry policy to post it with."""
        now = time.monotonic()
        waiting = {topic for topic, (when, _) in self._parked.items() if when > now}
        claimed = []
        for entry in self.store.claim_heads(skip_topics=waiting | self._inflight):
            self._inflight.add(entry.batch.topic)
            policy = ONE_ATTEMPT if entry.batch.topic in self._parked else self.retry
            claimed.append((entry, policy))
        return claimed

    def idle_timeout(self) -> float | None:
        """Seconds until something is due without outside events (``None``: nothing is)."""
        deadlines = [when for t, (when, _) in self._parked.items() if t not in self._inflight]
        linger = self.acc.next_deadline(busy_topics=self.busy_topics())
        if linger is not None:
            deadlines.append(linger)
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    # ------------------------------------------------------------------ outcomes
    def stored(self, entry: OutboxEntry, body: Any) -> list[tuple[Ticket, SendReceipt]]:
        """The service stored ``entry``: the callers to answer, with their receipts."""
        batch = entry.batch
        self.store.remove(entry.entry_id)
        _, tickets = self._tickets.pop(entry.entry_id, ("", []))
        self._forget(entry)
        if self._parked.pop(batch.topic, None) is not None:
            log.info("topic %s: the service is reachable again; the outbox resumes", batch.topic)
        receipts = receipts_of(batch, body)
        return [
            (t, receipts.get(t.message_id) or SendReceipt(t.message_id, batch.topic))
            for t in tickets
        ]

    def failed(self, entry: OutboxEntry, error: MQError) -> list[Ticket]:
        """Posting ``entry`` failed after its retry policy: the callers to fail (none when the
        batch is parked in a durable outbox)."""
        batch = entry.batch
        if self.store.durable and error.retriable:
            self.store.release(entry.entry_id)
            self._inflight.discard(batch.topic)
            _, failures = self._parked.get(batch.topic, (0.0, 0))
            ceiling = min(self.outbox_retry_max_s, 0.25 * 2**failures)
            delay = ceiling / 2 + random.uniform(0, ceiling / 2)
            if failures == 0:
                log.warning(
                    "topic %s: the service is unreachable (%s); messages wait in the outbox",
                    batch.topic,
                    error,
                )
            self._parked[batch.topic] = (time.monotonic() + delay, failures + 1)
            for topic, tickets in self._tickets.values():
                if topic == batch.topic:
                    for ticket in tickets:
                        ticket.park()
            return []
        self.store.remove(entry.entry_id)
        _, tickets = self._tickets.pop(entry.entry_id, ("", []))
        self._forget(entry)
        self._parked.pop(batch.topic, None)
        if not tickets:
            log.error(
                "dropping a batch of %d message(s) for %s (producer %s, sequence %d): %s",
                len(batch.message_ids),
                batch.topic,
                batch.producer_id,
                batch.sequence,
                error,
            )
        return tickets

    def _forget(self, entry: OutboxEntry) -> None:
        topic = entry.batch.topic
        self._inflight.discard(topic)
        self._stored_by_topic[topic] -= 1
        if not self._stored_by_topic[topic]:
            del self._stored_by_topic[topic]
        self.buffered_messages -= len(entry.batch.message_ids)
        self.buffered_bytes -= len(entry.batch.payload)

    # ------------------------------------------------------------------ flush, close
    def drained(self) -> bool:
        """Nothing is buffered, or (durable outbox) all that is left is parked."""
        if len(self.acc):
            return False
        busy = {t for t, n in self._stored_by_topic.items() if n}
        if not busy:
            return True
        return self.store.durable and busy <= set(self._parked) - self._inflight

    def leftovers(self) -> list[Ticket]:
        """At close: the callers still waiting. With a durable outbox, what was not sealed yet
        is sealed into it first (their messages will be sent by the next producer)."""
        tickets: list[Ticket] = []
        if self.store.durable:
            self.seal_due(everything=True)
        else:
            for batch in self.acc.due(busy_topics=set(), everything=True):
                tickets.extend(m.ticket for m in batch.messages)
        tickets += [t for _, ts in self._tickets.values() for t in ts]
        self._tickets.clear()
        return tickets
