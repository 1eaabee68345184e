"""Per-topic batching for the producers: messages gather until a batch is due, then it is sealed.

Pure bookkeeping, no I/O and no locking: the producer calls it under its own lock. A topic's
open batch is sealed when it is full (count or bytes), or when it lingered long enough and the
topic has nothing else in flight (so batches grow while a request is outstanding), or when a
flush or a blocking send asks for it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "REQUEST_OVERHEAD_BYTES",
    "Accumulator",
    "OpenBatch",
    "PendingMessage",
    "encode_request",
]

REQUEST_OVERHEAD_BYTES = 256
"""Room kept for the request's envelope (producer id, sequence, brackets)."""


@dataclass
class PendingMessage:
    """One message on its way: its wire form and what to notify when it is settled."""

    message_id: str
    wire: dict[str, Any]
    size: int
    """Bytes of its JSON form."""
    ticket: Any = None
    """The producer's handle for the caller (future, parked flag)."""


@dataclass
class OpenBatch:
    topic: str
    created_s: float
    messages: list[PendingMessage] = field(default_factory=list)
    size: int = REQUEST_OVERHEAD_BYTES
    urgent: bool = False
    """A flush or a blocking send is waiting for it: seal it as soon as the topic is idle."""


class Accumulator:
    """Open batches, one per topic, within ``max_batch_messages`` and ``max_batch_bytes``."""

    def __init__(
        self,
        *,
        linger_ms: float,
        max_batch_messages: int,
        max_batch_bytes: int,
        clock: Callable[[], float],
    ) -> None:
        self.linger_s = linger_ms / 1000
        self.max_batch_messages = max_batch_messages
        self.max_batch_bytes = max_batch_bytes
        self._clock = clock
        self._open: dict[str, OpenBatch] = {}
        self._full: list[OpenBatch] = []

    def __len__(self) -> int:
        """Messages held (open and full batches)."""
        return sum(len(b.messages) for b in self._open.values()) + sum(
            len(b.messages) for b in self._full
        )

    def add(self, topic: str, message: PendingMessage, *, urgent: bool = False) -> bool:
        """Append ``message`` to the open batch of ``topic`` (sealing it first if it is full).

        True when the sender should look again: a batch was filled or opened, or is urgent.
        """
        batch = self._open.get(topic)
        wake = urgent
        if batch is not None and batch.size + message.size + 1 > self.max_batch_bytes:
            self._full.append(self._open.pop(topic))
            batch = None
        if batch is None:
            batch = self._open[topic] = OpenBatch(topic, self._clock())
            wake = True
        batch.messages.append(message)
        batch.size += message.size + 1
        batch.urgent = batch.urgent or urgent
        if len(batch.messages) >= self.max_batch_messages:
            self._full.append(self._open.pop(topic))
            wake = True
        return wake

    def mark_urgent(self, topic: str | None = None) -> None:
        """Ask for the open batch of ``topic`` (of every topic when ``None``) to be sealed."""
        for name, batch in self._open.items():
            if topic is None or name == topic:
                batch.urgent = True

    def due(self, *, busy_topics: set[str], everything: bool = False) -> list[OpenBatch]:
        """Take the batches to seal now: full ones, and open ones whose time has come.

        An open batch is due when it is urgent or lingered ``linger_ms``, and its topic is not
        in ``busy_topics`` (a request in flight or batches queued); with ``everything`` every
        batch is due.
        """
        sealed, self._full = self._full, []
        now = self._clock()
        for topic, batch in list(self._open.items()):
            ready = batch.urgent or now - batch.created_s >= self.linger_s
            if everything or (ready and topic not in busy_topics):
                sealed.append(self._open.pop(topic))
        return sealed

    def requeue(self, batches: list[OpenBatch]) -> None:
        """Put batches taken by :meth:`due` back, first in line (their sealing failed)."""
        self._full[:0] = batches

    def next_deadline(self, *, busy_topics: set[str]) -> float | None:
        """When the next open batch of an idle topic stops lingering (clock time)."""
        deadlines = [
            b.created_s + self.linger_s for t, b in self._open.items() if t not in busy_topics
        ]
        if self._full:
            deadlines.append(self._clock())
        return min(deadlines, default=None)


def encode_request(producer_id: str, sequence: int, batch: OpenBatch) -> bytes:
    """The JSON body of the send request for ``batch``."""
    return json.dumps(
        {
            "producer_id": producer_id,
            "sequence": sequence,
            "messages": [m.wire for m in batch.messages],
        },
        separators=(",", ":"),
    ).encode()
