"""The outbox's contract: sealed send requests waiting for the service, in order per topic.

A small storage contract, :class:`Outbox`, with two implementations:

- :class:`SqliteOutbox` — durable (WAL, ``busy_timeout``, claims made and marked in one
  ``BEGIN IMMEDIATE`` transaction). One client owns a file at a time: an exclusive lock on
  ``<path>.lock`` is held while it is open (the kernel releases it if the process dies).
- :class:`MemoryOutbox` — the same contract in memory (the producer's queue when it has no
  outbox file, and a fake for tests).

A stored batch is the exact JSON request, with its producer id and sequence, so that resending
it (even from another process) is idempotent: the service stores it once.
Batches that were never claimed (so never sent) may be merged into their topic's head
(:meth:`Outbox.followers`, :meth:`Outbox.merge`); a batch once claimed is resent unchanged.

A batch the service refused for good (a non-retriable 4xx: the topic does not exist, ...) is
*set aside* with its :class:`Refusal` (:meth:`Outbox.refuse`): it is no longer sent, but it is
kept — listed by :meth:`Outbox.refused`, put back in line by :meth:`Outbox.retry_refused` (in
its original place, with its original producer id and sequence: a refused request stored
nothing, so resending it as it was cannot duplicate anything) or deleted by
:meth:`Outbox.purge_refused`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..errors import MQError

__all__ = ["Outbox", "OutboxBatch", "OutboxEntry", "OutboxStats", "RefusedBatch", "Refusal"]


@dataclass(frozen=True)
class OutboxBatch:
    """One sealed send request."""

    topic: str
    producer_id: str
    sequence: int
    message_ids: tuple[str, ...]
    """The client-made ids of its messages, in request order."""
    payload: bytes
    """The request body exactly as sent (JSON)."""


@dataclass(frozen=True)
class OutboxEntry:
    """A stored batch."""

    entry_id: int
    """Increasing in the order batches were appended."""
    batch: OutboxBatch
    attempts: int = 0
    """How many times it was claimed for sending."""


@dataclass(frozen=True)
class Refusal:
    """Why the service refused a batch for good."""

    code: str | None
    """The service's error code, e.g. ``TopicNotFound``."""
    message: str
    http_status: int | None
    refused_ms: int
    """When (ms since the epoch)."""

    @classmethod
    def of(cls, error: MQError, *, now_ms: int | None = None) -> Refusal:
        """The refusal ``error`` describes (now, unless ``now_ms`` is given)."""
        when = int(time.time() * 1000) if now_ms is None else now_ms
        return cls(error.code, error.message, error.http_status, when)


@dataclass(frozen=True)
class RefusedBatch:
    """A batch set aside after a refusal; see :meth:`Outbox.retry_refused`."""

    entry_id: int
    batch: OutboxBatch
    refusal: Refusal

    @property
    def topic(self) -> str:
        return self.batch.topic

    @property
    def message_ids(self) -> tuple[str, ...]:
        return self.batch.message_ids


@dataclass(frozen=True)
class OutboxStats:
    batches: int
    """Batches waiting to be sent (the refused ones are not counted here)."""
    messages: int
    bytes: int
    refused_batches: int = 0
    """Batches set aside after a refusal."""
    refused_messages: int = 0


class Outbox(ABC):
    """Where sealed batches wait, in order per topic, until the service stored them."""

    durable: ClassVar[bool]
    """Whether entries survive the process."""

    @abstractmethod
    def append(self, batch: OutboxBatch) -> OutboxEntry:
        """Store ``batch`` behind every earlier one."""

    @abstractmethod
    def claim_heads(self, *, skip_topics: Collection[str] = ()) -> list[OutboxEntry]:
        """Claim the oldest batch of every topic whose oldest batch is not claimed already.

        Topics in ``skip_topics`` are left alone. At most one batch per topic is ever claimed,
        so batches of a topic are sent one at a time, in order.
        """

    @abstractmethod
    def followers(self, head: OutboxEntry, *, limit: int) -> list[OutboxEntry]:
        """Up to ``limit`` batches of ``head``'s topic stored right behind it, oldest first,
        stopping at the first one ever claimed."""

    @abstractmethod
    def merge(self, head: OutboxEntry, batch: OutboxBatch, absorbed: Sequence[int]) -> OutboxEntry:
        """In one step: ``head`` (claimed) now holds ``batch``, and the ``absorbed`` batches are
        gone. ``head`` keeps its place (and claim): the merged batch is still its topic's head.
        """

    @abstractmethod
    def release(self, entry_id: int) -> None:
        """Give a claimed batch back (it stays the head of its topic)."""

    @abstractmethod
    def remove(self, entry_id: int) -> None:
        """Forget a batch (stored by the service, or refused for good)."""

    @abstractmethod
    def refuse(self, entry_id: int, refusal: Refusal) -> None:
        """Set a batch aside (refused for good): it is not sent any more, but kept."""

    @abstractmethod
    def refused(self) -> list[RefusedBatch]:
        """The batches set aside, oldest first."""

    @abstractmethod
    def retry_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        """Put refused batches (all when ``entry_ids`` is ``None``) back in line, each in its
        original place and unchanged; the batches moved."""

    @abstractmethod
    def purge_refused(self, entry_ids: Collection[int] | None = None) -> list[RefusedBatch]:
        """Delete refused batches (all when ``entry_ids`` is ``None``); the batches deleted."""

    @abstractmethod
    def entries(self) -> list[OutboxEntry]:
        """Every batch waiting to be sent (not the refused ones), oldest first."""

    @abstractmethod
    def stats(self) -> OutboxStats:
        """How much is stored."""

    @abstractmethod
    def topic_counts(self) -> dict[str, tuple[int, int, int]]:
        """Per topic: (batches, messages, bytes) stored."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the storage (idempotent)."""
