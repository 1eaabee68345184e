"""The producers' bookkeeping, without I/O scheduling or locks (shared by both producers).

:class:`ProducerOptions` holds a producer's settings and :func:`open_state` builds its
:class:`SendState`, which owns the accumulator and the outbox and decides what happens next:
which batches to seal, which to post, what a success or a failure means for the waiting callers.
:class:`~cirrusmq.producer.Producer` drives it from threads (under its lock) and
:class:`~cirrusmq.aio.AsyncProducer` from an event loop.

Ordering: a topic has at most one batch in flight (the outbox's head of that topic), so its
batches — and the messages of each message group — are stored in the order they were sealed.
A batch that fails with a retriable error after the full retry policy is *parked* when the
outbox is durable: it stays the head of its topic and is resent (same producer id and
sequence: the service stores it once) with a growing delay; new batches of a parked topic are
sealed straight into the outbox. Without a durable outbox, the batch's messages fail instead.
A batch the service refuses for good (a non-retriable error) fails its messages; in a durable
outbox it is also *set aside* there (never dropped): :meth:`SendState.retry_refused` puts it
back in line, :meth:`SendState.purge_refused` deletes it.

Durability: with a durable outbox a batch is sealed (written to it) as soon as it lingered
``linger_ms``, even while its topic has a request in flight, so an accepted message is on disk
within about ``linger_ms``. Such small batches are merged back into one request when their turn
comes (:meth:`SendState.claim`): only batches that were never claimed before — so never sent —
are merged, under a new sequence; a batch that may have reached the service keeps its producer
id and sequence. Without a durable outbox a busy topic's open batch keeps growing in memory
instead (nothing would be gained by sealing it early).

Retries: :mod:`.retries` (the transport's policy within a post; parked topics after it).

Its size (~550 lines): one state machine (seal, claim, merge, settle, park, set aside) whose
transitions share the accumulator, the outbox and the waiting callers; splitting it would
spread one invariant (one batch in flight per topic, resent unchanged) over several files.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any, Protocol

from ..errors import (
    MessageKeptError,
    MQError,
    OutboxFullError,
    PayloadTooLargeError,
    TransportError,
)
from ..message import Message, SendReceipt, new_message_id
from ..outbox import (
    MemoryOutbox,
    Outbox,
    OutboxBatch,
    OutboxEntry,
    Refusal,
    RefusedBatch,
    SqliteOutbox,
)
from ..transport import RetryPolicy
from ..wire import read_int, read_list, read_optional_int, read_str
from .accumulator import REQUEST_OVERHEAD_BYTES, Accumulator, PendingMessage, encode_request
from .retries import ONE_ATTEMPT, ParkedTopics

__all__ = [
    "MAX_REQUEST_BYTES",
    "ProducerOptions",
    "SendState",
    "Ticket",
    "open_state",
    "prepare",
    "validate_options",
]

log = logging.getLogger("cirrusmq.producer")

MAX_REQUEST_BYTES = 6 * 1024 * 1024
"""The service's request limit."""
_STORAGE_RETRY_S = 1.0
"""How soon a batch whose outbox bookkeeping failed is looked at again."""


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


@dataclass(frozen=True)
class ProducerOptions:
    """A producer's settings (both producers take them as keyword arguments)."""

    linger_ms: float = 5
    max_batch_messages: int = 500
    max_batch_bytes: int = 1024 * 1024
    max_attempts: int = 3
    request_timeout_s: float = 10.0
    outbox_path: str | PathLike[str] | None = None
    outbox_max_messages: int = 100_000
    outbox_max_bytes: int = 256 * 1024 * 1024
    large_body_threshold_bytes: int = 4 * 1024 * 1024
    """Bodies above this size (at most 4 MiB) are uploaded as their own objects first."""

    def __post_init__(self) -> None:
        if not 0 <= self.large_body_threshold_bytes <= 4 * 1024 * 1024:
            raise ValueError("large_body_threshold_bytes must be 0-4 MiB (the inline limit)")
        validate_options(
            linger_ms=self.linger_ms,
            max_batch_messages=self.max_batch_messages,
            max_batch_bytes=self.max_batch_bytes,
            request_timeout_s=self.request_timeout_s,
        )
        RetryPolicy(max_attempts=self.max_attempts)  # checks it

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(max_attempts=self.max_attempts)


def open_state(
    options: ProducerOptions,
    producer_id: str,
    retry: RetryPolicy,
    *,
    outbox_retry_max_s: float,
    clock: Any = time.monotonic,
) -> SendState:
    """Open the outbox (SQLite at ``options.outbox_path``, else memory) and the bookkeeping."""
    store: Outbox = SqliteOutbox(options.outbox_path) if options.outbox_path else MemoryOutbox()
    try:
        return SendState(
            producer_id=producer_id,
            store=store,
            accumulator=Accumulator(
                linger_ms=options.linger_ms,
                max_batch_messages=options.max_batch_messages,
                max_batch_bytes=options.max_batch_bytes,
                clock=clock,
            ),
            retry=retry,
            max_messages=options.outbox_max_messages,
            max_bytes=options.outbox_max_bytes,
            outbox_retry_max_s=outbox_retry_max_s,
        )
    except BaseException:
        store.close()
        raise


def prepare(message: Message, born_ms: int) -> tuple[str, dict[str, Any], int]:
    """``(message_id, wire form, JSON size)`` of a message about to be queued."""
    message_id = new_message_id()
    wire = message.to_wire(message_id, born_ms)
    size = len(json.dumps(wire, separators=(",", ":")))
    if size + REQUEST_OVERHEAD_BYTES > MAX_REQUEST_BYTES:
        raise PayloadTooLargeError(f"a message of {size} bytes (JSON) does not fit in a request")
    return message_id, wire, size


def receipts_of(batch: OutboxBatch, body: Any) -> dict[str, SendReceipt]:
    """The receipts of a send response by message id (``TransportError`` if malformed)."""
    receipts = read_list(body, "receipts", optional=True) if body is not None else []
    return {read_str(r, "message_id"): _receipt(batch.topic, r) for r in receipts}


def _receipt(topic: str, data: Any) -> SendReceipt:
    """One receipt; a scheduled (delayed) one has no offset but its due time."""
    due = read_optional_int(data, "delivery_timestamp")
    offset = read_optional_int(data, "offset") if due is not None else read_int(data, "offset")
    return SendReceipt(
        read_str(data, "message_id"),
        topic,
        read_int(data, "queue"),
        offset,
        delivery_timestamp=due,
    )


_PAYLOAD_START = b'{"producer_id":'
_MESSAGES_KEY = b',"messages":['


def messages_json(payload: bytes) -> bytes:
    """The JSON messages of a send request, comma-separated, without the brackets."""
    start = payload.find(_MESSAGES_KEY)
    # encode_request's layout: no JSON string holds an unescaped '"', so the first match is the
    # key itself. Anything else is decoded the slow way.
    if payload.startswith(_PAYLOAD_START) and start > 0 and payload.endswith(b"]}"):
        return payload[start + len(_MESSAGES_KEY) : -2]
    messages = json.loads(payload)["messages"]
    return json.dumps(messages, separators=(",", ":")).encode()[1:-1]


def merged_payload(producer_id: str, sequence: int, parts: Sequence[bytes]) -> bytes:
    """A send request made of the ``messages_json`` of several (as ``encode_request`` would)."""
    envelope = json.dumps(
        {"producer_id": producer_id, "sequence": sequence, "messages": []}, separators=(",", ":")
    ).encode()
    return envelope[:-2] + b",".join(parts) + b"]}"


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
        self._parked = ParkedTopics(outbox_retry_max_s)
        self._unreleased: dict[int, str] = {}
        """Entry id -> topic: claimed batches whose release failed in the store (retried)."""
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
        (parked topics excepted: their new batches go to the outbox at once). None with a
        durable outbox: there a batch is sealed — made durable — once it lingered."""
        if self.store.durable:
            return set()
        return {t for t, n in self._stored_by_topic.items() if n and t not in self._parked}

    def _next_sequence(self) -> int:
        sequence, self._sequence = self._sequence, self._sequence + 1
        return sequence

    def seal_due(self, *, everything: bool = False) -> None:
        """Seal the due batches into the outbox, each with the next sequence.

        If the outbox fails, the batches not sealed yet go back to the accumulator (first in
        line) and the error is raised: the sender tries again later.
        """
        due = self.acc.due(busy_topics=self.busy_topics(), everything=everything)
        for index, batch in enumerate(due):
            sequence = self._next_sequence()
            payload = encode_request(self.producer_id, sequence, batch)
            try:
                entry = self.store.append(
                    OutboxBatch(
                        batch.topic,
                        self.producer_id,
                        sequence,
                        tuple(m.message_id for m in batch.messages),
                        payload,
                    )
                )
            except BaseException:
                self.acc.requeue(due[index:])
                raise
            tickets: list[Ticket] = [m.ticket for m in batch.messages]
            self._tickets[entry.entry_id] = (batch.topic, tickets)
            self._stored_by_topic[batch.topic] += 1
            # From here on the request counts, not its parts.
            self.buffered_bytes += len(payload) - sum(m.size for m in batch.messages)
            if batch.topic in self._parked:
                for ticket in tickets:
                    ticket.park()

    def claim(self) -> list[tuple[OutboxEntry, RetryPolicy]]:
        """The head batches to post now, each with the retry policy to post it with.

        A head claimed for the first time was never sent: the batches queued right behind it
        (never claimed either) are merged into it, within the batch bounds.
        """
        self._retry_releases()
        waiting = self._parked.waiting(time.monotonic())
        claimed = []
        for entry in self.store.claim_heads(skip_topics=waiting | self._inflight):
            self._inflight.add(entry.batch.topic)
            if entry.attempts == 1:
                try:
                    entry = self._merge_followers(entry)
                except Exception:  # the merge is one transaction: the head is unchanged
                    log.exception("merging the batches of %s failed", entry.batch.topic)
            policy = ONE_ATTEMPT if entry.batch.topic in self._parked else self.retry
            claimed.append((entry, policy))
        return claimed

    def _merge_followers(self, head: OutboxEntry) -> OutboxEntry:
        """``head`` with the never-claimed batches behind it merged in, under a new sequence."""
        max_messages, max_bytes = self.acc.max_batch_messages, self.acc.max_batch_bytes
        count = len(head.batch.message_ids)
        if count >= max_messages:
            return head
        followers = self.store.followers(head, limit=max_messages - count)
        if not followers:
            return head
        parts: list[bytes] = []
        size = 0
        taken: list[OutboxEntry] = []
        for follower in followers:
            n = len(follower.batch.message_ids)
            if follower.attempts or count + n > max_messages:
                break
            if not parts:  # (full batches behind the head are the common case: no work then)
                parts.append(messages_json(head.batch.payload))
                size = len(merged_payload(self.producer_id, self._sequence, parts))
            part = messages_json(follower.batch.payload)
            if size + 1 + len(part) > max_bytes:
                break
            parts.append(part)
            taken.append(follower)
            count += n
            size += 1 + len(part)
        if not taken:
            return head
        sequence = self._next_sequence()
        batch = OutboxBatch(
            head.batch.topic,
            self.producer_id,
            sequence,
            head.batch.message_ids + tuple(i for f in taken for i in f.batch.message_ids),
            merged_payload(self.producer_id, sequence, parts),
        )
        merged = self.store.merge(head, batch, [f.entry_id for f in taken])
        topic, tickets = self._tickets.pop(head.entry_id, (batch.topic, []))
        for follower in taken:
            tickets = tickets + self._tickets.pop(follower.entry_id, (topic, []))[1]
        if tickets:
            self._tickets[merged.entry_id] = (topic, tickets)
        self._stored_by_topic[topic] -= len(taken)
        self.buffered_bytes += len(batch.payload) - sum(
            len(e.batch.payload) for e in (head, *taken)
        )
        return merged

    def idle_timeout(self) -> float | None:
        """Seconds until something is due without outside events (``None``: nothing is)."""
        deadlines = self._parked.deadlines(excluding=self._inflight)
        linger = self.acc.next_deadline(busy_topics=self.busy_topics())
        if linger is not None:
            deadlines.append(linger)
        return max(0.0, min(deadlines) - time.monotonic()) if deadlines else None

    # ------------------------------------------------------------------ outcomes
    def settle(
        self, entry: OutboxEntry, *, body: Any = None, error: MQError | None = None
    ) -> list[tuple[Ticket, SendReceipt | MQError]]:
        """A post of ``entry`` ended with a response ``body`` or with ``error``: the callers to
        answer, with their outcomes. A refusal that a durable outbox keeps is answered with
        :class:`MessageKeptError` (not the plain error: the message is not lost).

        If handling the outcome fails (a malformed response, the outbox failing), the batch is
        treated as having failed with a retriable error: parked when the outbox is durable
        (resent with the same producer id and sequence), failed otherwise.
        """
        try:
            if error is not None:
                kept = self.store.durable and not error.retriable
                outcome = MessageKeptError(error, entry.entry_id) if kept else error
                return [(t, outcome) for t in self.failed(entry, error)]
            return list(self.stored(entry, body))
        except Exception as exc:
            log.exception(
                "topic %s: could not record the outcome of a send (sequence %d)",
                entry.batch.topic,
                entry.batch.sequence,
            )
            failure = TransportError(f"could not record the outcome of a send: {exc!r}")
            return [(t, failure) for t in self._failed_anyway(entry, failure)]

    def stored(self, entry: OutboxEntry, body: Any) -> list[tuple[Ticket, SendReceipt]]:
        """The service stored ``entry``: the callers to answer, with their receipts."""
        batch = entry.batch
        receipts = receipts_of(batch, body)  # a malformed body raises before anything changes
        self.store.remove(entry.entry_id)
        _, tickets = self._tickets.pop(entry.entry_id, ("", []))
        self._forget(entry)
        if self._parked.resume(batch.topic):
            log.info("topic %s: the service is reachable again; the outbox resumes", batch.topic)
        return [
            (t, receipts.get(t.message_id) or SendReceipt(t.message_id, batch.topic))
            for t in tickets
        ]

    def failed(self, entry: OutboxEntry, error: MQError) -> list[Ticket]:
        """Posting ``entry`` failed after its retry policy: the callers to fail (none when the
        batch is parked in a durable outbox). A durable outbox sets a refused batch aside."""
        batch = entry.batch
        if self.store.durable and error.retriable:
            self.store.release(entry.entry_id)
            self._park(batch.topic, error)
            return []
        if self.store.durable:
            self.store.refuse(entry.entry_id, Refusal.of(error))
        else:
            self.store.remove(entry.entry_id)
        _, tickets = self._tickets.pop(entry.entry_id, ("", []))
        self._forget(entry)
        self._parked.resume(batch.topic)
        if self.store.durable:
            log.warning(
                "topic %s: the service refused %d message(s) (producer %s, sequence %d): %s; "
                "they are set aside in the outbox (list, retry or purge them: "
                "`cirrusmq outbox list --path …`)",
                batch.topic,
                len(batch.message_ids),
                batch.producer_id,
                batch.sequence,
                error,
            )
        elif not tickets:
            log.error(
                "dropping a batch of %d message(s) for %s (producer %s, sequence %d): %s",
                len(batch.message_ids),
                batch.topic,
                batch.producer_id,
                batch.sequence,
                error,
            )
        return tickets

    def retry_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        """Put refused batches back in line (unchanged, in their original places)."""
        moved = self.store.retry_refused(entry_ids)
        for refused in moved:
            self._stored_by_topic[refused.topic] += 1
            self.buffered_messages += len(refused.message_ids)
            self.buffered_bytes += len(refused.batch.payload)
        return moved

    def _park(self, topic: str, error: MQError, *, delay_s: float | None = None) -> None:
        self._inflight.discard(topic)
        if self._parked.park(topic, delay_s=delay_s):
            log.warning(
                "topic %s: not sent (%s); its messages wait in the outbox and are resent",
                topic,
                error,
            )
        for name, tickets in self._tickets.values():
            if name == topic:
                for ticket in tickets:
                    ticket.park()

    def _failed_anyway(self, entry: OutboxEntry, error: MQError) -> list[Ticket]:
        """:meth:`failed` with a retriable error, even if the outbox fails: then the batch
        stays claimed in the store, its release is retried, and its topic waits."""
        try:
            return self.failed(entry, error)
        except Exception:
            log.exception("topic %s: the outbox failed; retrying in a moment", entry.batch.topic)
            self._unreleased[entry.entry_id] = entry.batch.topic
            self._park(entry.batch.topic, error, delay_s=_STORAGE_RETRY_S)
            return []

    def _retry_releases(self) -> None:
        for entry_id, topic in list(self._unreleased.items()):
            try:
                self.store.release(entry_id)
            except Exception:
                self._parked.postpone(topic, _STORAGE_RETRY_S)
            else:
                del self._unreleased[entry_id]

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
        return self.store.durable and busy <= self._parked.topics() - self._inflight

    def leftovers(self, *, in_doubt: Collection[int] = ()) -> list[Ticket]:
        """At close: the callers still waiting, except those of the batches ``in_doubt`` (a
        request still on the wire: they are answered when it ends). With a durable outbox,
        what was not sealed yet is sealed into it first (the next producer sends it)."""
        tickets: list[Ticket] = []
        if self.store.durable:
            self.seal_due(everything=True)
        else:
            for batch in self.acc.due(busy_topics=set(), everything=True):
                tickets.extend(m.ticket for m in batch.messages)
        for entry_id in [i for i in self._tickets if i not in in_doubt]:
            tickets += self._tickets.pop(entry_id)[1]
        return tickets
