"""Consuming: one module per way to consume, and the pieces they share.

- ``simple``: :class:`SimpleConsumer` (the application receives and acks); ``aio`` its asyncio
  twin; ``base`` what both share (receive plan, ack calls).
- ``push``: :class:`PushConsumer` (the SDK receives, a listener processes, the SDK acks);
  ``orderly`` its per-queue sequential processing; ``membership`` the heartbeats that register
  it with its group; ``steps`` its exactly-once steps (``exactly_once=producer``).
- ``pull``: :class:`PullConsumer` (reads queues by offset, offsets kept locally:
  ``offset_store``, one live owner each: ``offset_owner``).
- ``broadcast``: :class:`BroadcastConsumer`, the push consumer whose every instance gets every
  message (:class:`MessageModel`).
- ``acks`` / ``nacks``: the requests and per-handle results of acks and nacks;
  ``pending_acks``: acks that could not reach the service, retried until they expire.
- ``pacing``: the idle consumers' growing poll interval; ``paths``: the group API paths.
"""

from __future__ import annotations

from .acks import AckResult, AckStatus
from .aio import AsyncSimpleConsumer
from .broadcast import BroadcastConsumer
from .membership import ConsumerInfo
from .pull import PullConsumer
from .push import MessageListener, MessageModel, PushConsumer
from .simple import SimpleConsumer
from .steps import BatchStepListener, StepListener

__all__ = [
    "AckResult",
    "AckStatus",
    "AsyncSimpleConsumer",
    "BatchStepListener",
    "BroadcastConsumer",
    "ConsumerInfo",
    "MessageListener",
    "MessageModel",
    "PullConsumer",
    "PushConsumer",
    "SimpleConsumer",
    "StepListener",
]
