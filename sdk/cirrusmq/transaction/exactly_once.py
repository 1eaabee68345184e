"""Exactly-once consume -> produce: :class:`ExactlyOnceProducer` and its asyncio twin.

::

    with ExactlyOnceProducer(endpoint, credentials, producer_group="enricher",
                             transactional_id="enricher-1") as producer, \\
         SimpleConsumer(endpoint, credentials, "enricher", ["orders"]) as consumer:
        for order in consumer.receive(10, 30):
            with producer.exactly_once(consumer) as step:
                step.send(Message("orders.enriched", enrich(order.body)))
                step.ack(order)
            # a clean exit committed both; an exception committed neither

A step is committed by the service as ONE transaction: the acks of its receipt handles and
the append of its messages happen together or not at all (docs/transactions.md). A retry of
the commit (a lost answer) is answered with the first result and stores nothing twice. The
step is refused, with nothing sent or acked, when a lease moved on meanwhile
(:class:`~cirrusmq.errors.LeaseMovedOnError`: the messages come back), when a newer instance
registered the same ``transactional_id`` (:class:`~cirrusmq.errors.ProducerFencedError`), or
when it needs more than one transaction holds (:class:`~cirrusmq.errors.StepTooLargeError`).
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..client_transport import client_transport
from ..credentials import Credentials
from ..errors import ClientClosedError, ProducerFencedError
from ..large_body import INLINE_MAX_BYTES, is_large, upload_body
from ..message import Message, MessageView, SendReceipt, new_message_id
from ..transport import AsyncTransport, RetryPolicy, Transport
from ..wire import read_bool, read_int, read_list, read_mapping, read_optional_int, read_str
from .models import group_path, now_ms

__all__ = [
    "AsyncExactlyOnceProducer",
    "AsyncExactlyOnceStep",
    "ExactlyOnceProducer",
    "ExactlyOnceStep",
    "StepResult",
]


class _Consumer(Protocol):
    group: str


@dataclass(frozen=True)
class StepResult:
    """What a committed step did."""

    receipts: list[SendReceipt]
    """One per message sent, in order."""
    acked: int
    """Receipt handles acked."""
    duplicate: bool
    """True when the service had committed this step before (a retried commit)."""


@dataclass
class _Pending:
    """A step's sends and acks, and once it is committing, the request it sends (kept, so a
    commit sent again is the same step: same sequence, message ids and handles)."""

    group: str
    messages: list[Message] = field(default_factory=list)
    handles: list[str] = field(default_factory=list)
    request: dict[str, Any] | None = None
    state: str = "OPEN"
    """OPEN, COMMITTED or ABORTED."""

    def add_message(self, message: Message) -> None:
        self._check_open()
        self.messages.append(message)

    def add_ack(self, message: MessageView | str) -> None:
        self._check_open()
        handle = message if isinstance(message, str) else message.receipt_handle
        if not handle:
            raise ValueError("ack needs a received message (it has no receipt handle)")
        self.handles.append(handle)

    def empty(self) -> bool:
        """Nothing to send or ack: committed without a request (the service refuses an
        empty step)."""
        return not self.messages and not self.handles

    def _check_open(self) -> None:
        if self.state != "OPEN" or self.request is not None:
            raise ClientClosedError(f"the step is {self.state.lower()}: start another one")

    def body(self, producer: _ProducerCore, sequence: int, wire: list[list[dict]]) -> dict:
        outputs: dict[str, list[dict]] = {}
        for message, wired in zip(self.messages, wire, strict=True):
            outputs.setdefault(message.topic, []).extend(wired)
        return {
            "transactional_id": producer.transactional_id,
            "epoch": producer.epoch,
            "sequence": sequence,
            "group": self.group,
            "receipt_handles": list(self.handles),
            "outputs": [{"topic": t, "messages": ms} for t, ms in outputs.items()],
        }

    def result(self, body: Any) -> StepResult:
        """The service's answer, receipts in the order the messages were sent."""
        data = read_mapping(body)
        by_topic: dict[str, list[Message]] = {}
        for message in self.messages:
            by_topic.setdefault(message.topic, []).append(message)
        topics = [t for t, ms in by_topic.items() for _ in ms]  # the request's order
        rows = read_list(data, "receipts")
        receipts = {}
        for topic, row in zip(topics, rows, strict=True):
            receipts.setdefault(topic, []).append(_receipt(topic, row))
        ordered = [receipts[m.topic].pop(0) for m in self.messages]
        return StepResult(ordered, read_int(data, "acked"), read_bool(data, "duplicate"))


def _receipt(topic: str, data: Any) -> SendReceipt:
    due = read_optional_int(data, "delivery_timestamp")
    offset = read_optional_int(data, "offset")
    return SendReceipt(
        read_str(data, "message_id"), topic, read_int(data, "queue"), offset, delivery_timestamp=due
    )


class _ProducerCore:
    """What the sync and async producers share: identity, epoch, step numbers."""

    def __init__(self, producer_group: str, transactional_id: str | None) -> None:
        self.producer_group = producer_group
        self.transactional_id = transactional_id or f"eo-{new_message_id()}"
        """Names this producer for fencing: give a stable one so that a restarted instance
        fences its predecessor."""
        self.epoch = 0
        """This instance's epoch (a newer registration of the same id fences it)."""
        self.fenced = False
        """True once the service said a newer instance took over."""
        self._sequences = itertools.count()
        self._lock = threading.Lock()

    def _next_sequence(self) -> int:
        with self._lock:
            return next(self._sequences)

    @property
    def _steps_path(self) -> str:
        return f"{group_path(self.producer_group)}/steps"

    @property
    def _register_path(self) -> str:
        return f"{group_path(self.producer_group)}/producers"


class ExactlyOnceStep:
    """One step: :meth:`send` messages, :meth:`ack` received messages, then :meth:`commit`
    (a ``with`` block commits on a clean exit and aborts on an exception)."""

    def __init__(self, producer: ExactlyOnceProducer, consumer: _Consumer) -> None:
        self.producer = producer
        self._pending = _Pending(consumer.group)
        self.result: StepResult | None = None
        """Set once the step committed."""

    @property
    def state(self) -> str:
        return self._pending.state

    def send(self, message: Message) -> None:
        """Append ``message`` when the step commits."""
        self._pending.add_message(message)

    def ack(self, message: MessageView | str) -> None:
        """Ack ``message`` (received through the consumer) when the step commits."""
        self._pending.add_ack(message)

    def commit(self) -> StepResult:
        """Commit the step (again after a failure: the same step, stored once)."""
        if self.result is not None:
            return self.result
        pending = self._pending
        if pending.state != "OPEN":
            raise ClientClosedError(f"the step is {pending.state.lower()}")
        if pending.empty():
            return self._committed(StepResult([], 0, False))
        if pending.request is None:
            born = now_ms()
            wire = [[self.producer._wired(m, born)] for m in pending.messages]
            pending.request = pending.body(self.producer, self.producer._next_sequence(), wire)
        try:
            body = self.producer._transport.request(
                "POST", self.producer._steps_path, json_body=pending.request
            )
        except ProducerFencedError:
            self.producer.fenced = True
            raise
        return self._committed(pending.result(body))

    def _committed(self, result: StepResult) -> StepResult:
        self.result = result
        self._pending.state = "COMMITTED"
        return result

    def abort(self) -> None:
        """Drop the step: nothing is sent or acked (the messages come back after their
        invisible duration)."""
        if self._pending.state == "OPEN":
            self._pending.state = "ABORTED"

    def __enter__(self) -> ExactlyOnceStep:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class ExactlyOnceProducer(_ProducerCore):
    """Commits exactly-once consume -> produce steps for ``producer_group``.

    It registers ``transactional_id`` (as a :class:`~cirrusmq.TransactionProducer` does) and
    gets an epoch: a newer registration of the same id fences this instance's steps."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        producer_group: str,
        transactional_id: str | None = None,
        request_timeout_s: float = 30.0,
        max_attempts: int = 3,
        transport: Transport | None = None,
    ) -> None:
        super().__init__(producer_group, transactional_id)
        self._transport, self._own_transport = client_transport(
            transport, endpoint, credentials, request_timeout_s, max_attempts
        )
        self._closed = False
        body = self._transport.request(
            "POST", self._register_path, json_body={"transactional_id": self.transactional_id}
        )
        self.epoch = read_int(read_mapping(body), "epoch")

    def exactly_once(self, consumer: _Consumer) -> ExactlyOnceStep:
        """A new step acking messages ``consumer`` received (nothing is sent until it
        commits)."""
        if self._closed:
            raise ClientClosedError("the producer is closed")
        return ExactlyOnceStep(self, consumer)

    def _wired(self, message: Message, born: int) -> dict[str, Any]:
        if is_large(message.body, INLINE_MAX_BYTES) and message.large_body is None:
            pointer = upload_body(self._transport, message.topic, message.body)
            message = dataclasses.replace(message, body=b"", large_body=pointer)
        return message.to_wire(new_message_id(), born)

    def close(self) -> None:
        """Idempotent; open steps are dropped (nothing of them was sent)."""
        if self._closed:
            return
        self._closed = True
        if self._own_transport:
            self._transport.close()

    def __enter__(self) -> ExactlyOnceProducer:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()


class AsyncExactlyOnceStep:
    """:class:`ExactlyOnceStep` on asyncio: ``async with`` commits on a clean exit."""

    def __init__(self, producer: AsyncExactlyOnceProducer, consumer: _Consumer) -> None:
        self.producer = producer
        self._pending = _Pending(consumer.group)
        self.result: StepResult | None = None

    @property
    def state(self) -> str:
        return self._pending.state

    def send(self, message: Message) -> None:
        self._pending.add_message(message)

    def ack(self, message: MessageView | str) -> None:
        self._pending.add_ack(message)

    async def commit(self) -> StepResult:
        if self.result is not None:
            return self.result
        pending = self._pending
        if pending.state != "OPEN":
            raise ClientClosedError(f"the step is {pending.state.lower()}")
        if pending.empty():
            return self._committed(StepResult([], 0, False))
        if pending.request is None:
            born = now_ms()
            for message in pending.messages:
                if is_large(message.body, INLINE_MAX_BYTES) and message.large_body is None:
                    raise ValueError("an async step sends bodies up to 4 MiB")
            wire = [[m.to_wire(new_message_id(), born)] for m in pending.messages]
            pending.request = pending.body(self.producer, self.producer._next_sequence(), wire)
        try:
            body = await self.producer._transport.request(
                "POST", self.producer._steps_path, json_body=pending.request
            )
        except ProducerFencedError:
            self.producer.fenced = True
            raise
        return self._committed(pending.result(body))

    def _committed(self, result: StepResult) -> StepResult:
        self.result = result
        self._pending.state = "COMMITTED"
        return result

    def abort(self) -> None:
        if self._pending.state == "OPEN":
            self._pending.state = "ABORTED"

    async def __aenter__(self) -> AsyncExactlyOnceStep:
        return self

    async def __aexit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            await self.commit()
        else:
            self.abort()


class AsyncExactlyOnceProducer(_ProducerCore):
    """:class:`ExactlyOnceProducer` on asyncio; it registers on ``start`` (or entering
    ``async with``)."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        producer_group: str,
        transactional_id: str | None = None,
        request_timeout_s: float = 30.0,
        max_attempts: int = 3,
        transport: AsyncTransport | None = None,
    ) -> None:
        super().__init__(producer_group, transactional_id)
        self._own_transport = transport is None
        self._transport = transport or AsyncTransport(
            endpoint,
            credentials,
            request_timeout_s=request_timeout_s,
            retry=RetryPolicy(max_attempts=max_attempts),
        )
        self._closed = False

    async def start(self) -> None:
        """Register the transactional id (idempotent: once per instance)."""
        if self.epoch:
            return
        body = await self._transport.request(
            "POST", self._register_path, json_body={"transactional_id": self.transactional_id}
        )
        self.epoch = read_int(read_mapping(body), "epoch")

    def exactly_once(self, consumer: _Consumer) -> AsyncExactlyOnceStep:
        if self._closed or not self.epoch:
            raise ClientClosedError("the producer is closed or not started")
        return AsyncExactlyOnceStep(self, consumer)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._own_transport:
            await self._transport.close()

    async def __aenter__(self) -> AsyncExactlyOnceProducer:
        await self.start()
        return self

    async def __aexit__(self, *_: Any) -> None:
        await self.close()
