"""Message trace: what happened to the messages of traced topics, one write per request.

Recording. A request (an HTTP call, one move of a scheduled function) opens a scope with
:meth:`TraceRecorder.request`; the broker's services call the ``record_*`` functions below
as they touch messages; the events collect in the scope (a context variable) and are written
as ONE trace object when the scope closes (storage/trace_objects.py), whatever the number of
messages. A scope opened inside another joins it. A topic whose ``trace`` flag is off (the
flag comes from the topic record the service already holds) records nothing and costs
nothing; a ``record_*`` call outside any scope records nothing either. A failed trace write
is logged and counted (``TraceWriteErrors``), never raised: tracing never fails a request.

Security: events hold ids, places, groups, client and producer ids, attempts and times —
what the API shows the keys that may read the topic — never a body, a key, a tag or a
property.

Lookup (:class:`TraceReader`): a message id that is a ULID carries its birth time; the
reader lists only the trace objects written from ``CLOCK_SKEW_MS`` before that time to
the end of the message's lifetime window (the topic's retention + ``LATE_EVENTS_HOURS``,
never after now), skips by name those of other topics, and reads at most
``MAX_OBJECT_READS`` of them (``MAX_LIST_PAGES`` LISTs). Acks and nacks name a message by
its lease's place (topic, queue, offset), not its id: they are joined to the message through
the places it was delivered from.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ulid import ULID

from ..errors import MessageNotFound
from ..message_ids import spellings
from ..model import NewMessage, ReceivedMessage, SendReceipt, StoredMessage, Topic
from ..rules.receipts import ReceiptHandle
from ..rules.retries import deliveries, retry_origin
from ..storage.trace_objects import TraceObjectStore, encode, may_concern, object_key
from ..telemetry import MetricUnit, emit_metrics
from ..validation import check_message_id
from .message_lookup import CLOCK_SKEW_MS, MessageLookup, ulid_time_ms
from .topic_catalog import TopicCatalog

log = logging.getLogger("cirrusmq_broker.trace")

LATE_EVENTS_HOURS = 24
"""Events are looked for this long past the topic's retention after a message's birth."""
MAX_OBJECT_READS = 256
"""Trace objects one lookup reads at most."""
MAX_LIST_PAGES = 64
"""LISTs (1,000 keys each) one lookup makes at most."""
KIND_ORDER = (
    "sent",
    "scheduled",
    "released",
    "committed",
    "rolled_back",
    "delivered",
    "nacked",
    "expired",
    "moved_to_retry",
    "dead_lettered",
    "redriven",
    "acked",
)
"""Events of the same millisecond sort in this order (a message's life goes this way)."""


@dataclass
class _Scope:
    recorder: Callable[[], TraceRecorder]
    """Resolved only when a traced topic records an event (or at the flush of one)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    retention_hours: int = 0
    topics: set[str] = field(default_factory=set)
    time: int | None = None
    """The request's time: every event of one request carries it (a request's events
    then sort by :data:`KIND_ORDER`, not by which service call recorded first)."""


_scope: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "cirrusmq_trace_scope", default=None
)


class TraceRecorder:
    """Opens per-request scopes and writes each one's events as one object."""

    def __init__(self, store: TraceObjectStore, clock: Callable[[], int]) -> None:
        self._store = store
        self._clock = clock
        self.writes = 0
        """Trace objects written by this process (tests count them)."""
        self.write_errors = 0

    def request(self) -> contextlib.AbstractContextManager[None]:
        """Collect the events of the code inside; write them once at its end."""
        return request_scope(lambda: self)

    def now(self) -> int:
        return self._clock()

    def flush(self, scope: _Scope) -> None:
        if not scope.events:
            return
        now = self._clock()
        try:
            key = object_key(str(ULID.from_timestamp(now / 1000)), now, sorted(scope.topics))
            self._store.put(key, encode(scope.events), retention_hours=scope.retention_hours)
            self.writes += 1
        except Exception:  # never fail the request for its trace
            self.write_errors += 1
            log.exception("trace write failed", extra={"events": len(scope.events)})
            emit_metrics({"TraceWriteErrors": (MetricUnit.Count, 1)}, [{}])


@contextlib.contextmanager
def request_scope(recorder: Callable[[], TraceRecorder]) -> Iterator[None]:
    """A request's trace scope; ``recorder`` is asked for only if an event is recorded (a
    request of untraced topics builds nothing). A scope inside another joins it."""
    if _scope.get() is not None:
        yield
        return
    scope = _Scope(recorder)
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)
        if scope.events:
            recorder().flush(scope)


def _record(topic: Topic | None, kind: str, rows: Iterable[dict[str, Any]]) -> None:
    """Add events of ``kind`` about messages of ``topic`` to the open scope (if traced)."""
    scope = _scope.get()
    if scope is None or topic is None or not topic.trace:
        return
    if scope.time is None:
        scope.time = scope.recorder().now()
    now = scope.time
    added = False
    for row in rows:
        scope.events.append({"time": now, **row, "kind": kind, "topic": topic.name})
        added = True
    if added:
        scope.topics.add(topic.name)
        scope.retention_hours = max(scope.retention_hours, topic.retention_hours)


def tracing() -> bool:
    """Whether a trace scope is open (hooks skip their work outside one)."""
    return _scope.get() is not None


# ------------------------------------------------------------------ what services record
def record_sent(
    topic: Topic,
    messages: Sequence[NewMessage],
    receipts: Sequence[SendReceipt],
    producer_id: str | None,
    *,
    transaction_id: str | None = None,
) -> None:
    """A send stored ``messages`` (``sent``) or scheduled them (``scheduled``)."""
    if not topic.trace:
        return
    born = {m.message_id: m.born_timestamp for m in messages}
    for kind, scheduled in (("sent", False), ("scheduled", True)):
        _record(
            topic,
            kind,
            (
                {
                    "message_id": r.message_id,
                    "queue": r.queue,
                    "offset": r.offset,
                    "producer_id": producer_id,
                    "born_timestamp": born.get(r.message_id),
                    "delivery_timestamp": r.delivery_timestamp,
                    "transaction_id": transaction_id,
                }
                for r in receipts
                if r.scheduled is scheduled
            ),
        )


def record_delivered(
    topic: Topic,
    group: str,
    client_id: str | None,
    received: Sequence[ReceivedMessage],
    decode: Callable[[str], ReceiptHandle],
) -> None:
    """A receive handed ``received`` to ``client_id`` of ``group``."""
    if not topic.trace or not received or not tracing():
        return
    rows = []
    for r in received:
        handle = decode(r.receipt_handle)
        rows.append(
            {
                "message_id": r.message.message_id,
                "queue": handle.queue,
                "offset": handle.offset,
                "lease_topic": handle.topic,
                "group": group,
                "client_id": client_id,
                "attempt": r.delivery_attempt,
                "invisible_until": r.invisible_until,
                "born_timestamp": r.message.born_timestamp,
            }
        )
    _record(topic, "delivered", rows)


def record_settled(
    kind: str,
    topics: TopicCatalog,
    handles: Iterable[ReceiptHandle],
    *,
    reason: str | None = None,
) -> None:
    """``handles`` were acked / nacked (``kind``): events by the lease's place."""
    if not tracing():
        return
    by_topic: dict[str, list[dict[str, Any]]] = {}
    marked: set[str] = set()
    for h in handles:
        user_topic = retry_origin(h.group, h.topic) or h.topic
        if h.traced:
            marked.add(user_topic)
        by_topic.setdefault(user_topic, []).append(
            {
                "queue": h.queue,
                "offset": h.offset,
                "lease_topic": h.topic,
                "group": h.group,
                "attempt": h.delivery_attempt,
                "reason": reason,
            }
        )
    for name, rows in by_topic.items():
        topic = _traced_topic(topics, name)
        if topic is None and name in marked:
            topic = _read_topic(topics, name)
        _record(topic, kind, rows)


def record_moved(
    topics: TopicCatalog,
    group: str,
    topic: Topic,
    messages: Sequence[StoredMessage],
    attempts: Sequence[int],
    *,
    target_topic: str,
    dead: bool,
    reason: str | None,
) -> None:
    """``messages`` (delivered ``attempts`` times) moved to the retry topic or the DLQ."""
    if not tracing():
        return
    origin = _traced_topic(topics, retry_origin(group, topic.name) or topic.name)
    _record(
        origin,
        "dead_lettered" if dead else "moved_to_retry",
        (
            {
                "message_id": m.message_id,
                "group": group,
                "attempt": deliveries(m, a),
                "target_topic": target_topic,
                "reason": reason,
                "born_timestamp": m.born_timestamp,
            }
            for m, a in zip(messages, attempts, strict=True)
        ),
    )


def record_expired(
    topics: TopicCatalog,
    group: str,
    topic: Topic,
    messages: Sequence[StoredMessage],
    attempt: int,
) -> None:
    """The lease of ``messages`` (delivered ``attempt`` times) ran out unacked."""
    if not tracing() or not messages:
        return
    origin = _traced_topic(topics, retry_origin(group, topic.name) or topic.name)
    _record(
        origin,
        "expired",
        (
            {
                "message_id": m.message_id,
                "group": group,
                "attempt": deliveries(m, attempt),
                "lease_topic": topic.name,
                "queue": m.queue,
                "offset": m.offset,
                "born_timestamp": m.born_timestamp,
            }
            for m in messages
        ),
    )


def record_half_sent(
    topic: Topic,
    messages: Sequence[NewMessage],
    queues: Sequence[int],
    transaction_id: str,
    producer_id: str,
) -> None:
    """Half messages of a transaction were stored (``sent``, invisible until committed)."""
    _record(
        topic,
        "sent",
        (
            {
                "message_id": m.message_id,
                "queue": q,
                "producer_id": producer_id,
                "transaction_id": transaction_id,
                "born_timestamp": m.born_timestamp,
            }
            for m, q in zip(messages, queues, strict=True)
        ),
    )


def record_transaction(
    topics: TopicCatalog, topic_name: str, kind: str, transaction_id: str, reason: str | None = None
) -> None:
    """A transaction was ``committed`` or ``rolled_back``: one event for all its messages
    (a lookup joins it to a message through the transaction id of its ``sent`` event)."""
    if not tracing():
        return
    topic = _traced_topic(topics, topic_name)
    _record(topic, kind, [{"transaction_id": transaction_id, "reason": reason}])


def record_placed(
    topic: Topic | None,
    kind: str,
    messages: Sequence[StoredMessage | NewMessage],
    queue: int | None,
    base_offset: int | None,
    **fields: Any,
) -> None:
    """A move stored ``messages`` in ``topic`` (queue ``queue`` from ``base_offset``):
    ``released`` (a delayed message due), ``committed``, ``redriven``; or settled them
    without storing (``rolled_back``: no queue)."""
    if topic is None or not topic.trace:
        return
    _record(
        topic,
        kind,
        (
            {
                "message_id": m.message_id,
                "born_timestamp": m.born_timestamp,
                "queue": queue,
                "offset": None if base_offset is None else base_offset + i,
                **fields,
            }
            for i, m in enumerate(messages)
        ),
    )


def traced_deliveries(
    receive: Callable[..., list[ReceivedMessage]],
    topics: TopicCatalog,
    decode: Callable[[str], ReceiptHandle],
    mark: Callable[[str], str],
) -> Callable[..., list[ReceivedMessage]]:
    """``receive`` recording ``delivered`` events of a traced topic, its handles marked
    (``mark``) as of a traced topic: their ack is traced on any instance, also one that has
    not the topic cached (an ack does not read its topic)."""

    def traced(group: str, topic_name: str, **options: Any) -> list[ReceivedMessage]:
        received = receive(group, topic_name, **options)
        if not received:
            return received
        topic = _traced_topic(topics, topic_name)  # cached: the receive just read it
        if topic is None or not topic.trace:
            return received
        received = [replace(r, receipt_handle=mark(r.receipt_handle)) for r in received]
        if tracing():
            record_delivered(topic, group, options.get("client_id"), received, decode)
        return received

    return traced


def traced_settles(
    kind: str,
    settle: Callable[..., list[Any]],
    topics: TopicCatalog,
    decode: Callable[[str], ReceiptHandle],
) -> Callable[..., list[Any]]:
    """An ack or nack (``settle``) recording ``kind`` events for the handles it settled
    (outcome ``acked``) of traced topics."""

    def traced(group: str, receipt_handles: list[str], *args: Any, **kwargs: Any) -> list[Any]:
        outcomes = settle(group, receipt_handles, *args, **kwargs)
        if tracing():
            settled = [o.receipt_handle for o in outcomes if o.status.value == "acked"]
            record_settled(kind, topics, (decode(h) for h in settled))
        return outcomes

    return traced


def _read_topic(topics: TopicCatalog, name: str) -> Topic | None:
    """The user topic ``name`` read (then cached): only for a handle marked as of a traced
    topic that this instance has not cached, so at most one read per topic and request."""
    if "." in name:
        return None
    try:
        return topics.active(name)
    except Exception:  # gone or unreadable: the trace never fails the settle
        log.warning("trace: topic %r not readable for a settle", name, exc_info=True)
        return None


def _traced_topic(topics: TopicCatalog, name: str) -> Topic | None:
    """The user topic ``name`` as this process has it cached (the request read it, or one
    did within the cache's 30 s); None if it is not cached, internal or gone. Never a read:
    a request of an untraced topic makes no call for the trace."""
    if "." in name:
        return None
    return topics.cached(name)


# ------------------------------------------------------------------ reading a trace
class TraceReader:
    """A message's trace events, bounded by its lifetime window (see the module doc)."""

    def __init__(
        self,
        *,
        topics: TopicCatalog,
        store: TraceObjectStore,
        lookup: MessageLookup,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._store = store
        self._lookup = lookup
        self._clock = clock

    def trace_message(
        self, topic_name: str, message_id: str, *, access_key: str | None = None
    ) -> list[dict[str, Any]]:
        """The events of ``message_id`` in ``topic_name``, in time order; MessageNotFound
        if there are none (and the message is not found either). An id in UUID form is
        read as the ULID SQS spells that way, then as written."""
        topic = self._topics.active(topic_name)
        check_message_id(message_id)
        *likelier, written = spellings(message_id)
        for one in likelier:
            try:
                return self._trace(topic, one, access_key)
            except MessageNotFound:
                pass
        return self._trace(topic, written, access_key)

    def _trace(self, topic: Topic, message_id: str, access_key: str | None) -> list[dict[str, Any]]:
        born = ulid_time_ms(message_id)
        if born is None:
            born = self._lookup.lookup(topic.name, message_id, access_key=access_key).born_timestamp
        now = self._clock()
        if born - CLOCK_SKEW_MS > now:  # an id of a time to come: nothing was recorded yet
            raise MessageNotFound(f"no trace of message {message_id!r} in topic {topic.name!r}")
        start = born - CLOCK_SKEW_MS
        lifetime_end = born + (topic.retention_hours + LATE_EVENTS_HOURS) * 3_600_000
        end = min(max(now, born + CLOCK_SKEW_MS), lifetime_end)
        rows: list[dict[str, Any]] = []
        reads = 0
        for key in self._store.keys_between(start, end, max_pages=MAX_LIST_PAGES):
            if not may_concern(key, topic.name):
                continue
            if reads >= MAX_OBJECT_READS:
                break
            reads += 1
            rows.extend(r for r in self._store.read(key) if r.get("topic") == topic.name)
        events = _events_of(rows, message_id)
        if not events:
            raise MessageNotFound(f"no trace of message {message_id!r} in topic {topic.name!r}")
        return events


def _events_of(rows: list[dict[str, Any]], message_id: str) -> list[dict[str, Any]]:
    """The rows about ``message_id``: its own, and acks / nacks of the leases it was
    delivered under (group, lease topic, queue, offset), with the attempt of the delivery
    they settled (a lease of the retry topic counts its own attempts)."""
    own = [r for r in rows if r.get("message_id") == message_id]
    attempts: dict[tuple[Any, ...], list[Any]] = {}  # place → its deliveries' attempts
    for r in sorted(own, key=lambda r: (r["time"], r.get("attempt") or 0)):
        if r["kind"] == "delivered":
            attempts.setdefault(_place(r), []).append(r.get("attempt"))
    transactions = {r["transaction_id"] for r in own if r.get("transaction_id")}
    joined = [
        {**r, "attempt": _nth(attempts[_place(r)], r.get("attempt"))}
        for r in rows
        if r.get("message_id") is None and _place(r) in attempts
    ] + [
        r
        for r in rows
        if r.get("message_id") is None
        and r["kind"] in ("committed", "rolled_back")
        and r.get("transaction_id") in transactions
    ]
    order = {kind: i for i, kind in enumerate(KIND_ORDER)}
    events = [
        {k: v for k, v in {**r, "message_id": message_id}.items() if v is not None}
        for r in own + joined
    ]
    events.sort(key=lambda e: (e["time"], e.get("attempt", 0), order.get(e["kind"], len(order))))
    return events


def _nth(attempts: list[Any], lease_attempt: int | None) -> Any:
    """The attempt of the delivery a settle of a lease's ``lease_attempt``-th delivery
    settled: a place is delivered again in place (FIFO) or under its own count (a retry
    topic's lease), so it is the place's ``lease_attempt``-th delivery, not its latest."""
    index = (lease_attempt or 1) - 1
    return attempts[index] if 0 <= index < len(attempts) else attempts[-1]


def _place(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row.get("group"), row.get("lease_topic"), row.get("queue"), row.get("offset"))
