"""asyncio clients: :class:`AsyncProducer` and :class:`AsyncSimpleConsumer`.

Same semantics as :class:`~cirrusmq.producer.Producer` and
:class:`~cirrusmq.consumer.SimpleConsumer`; the I/O runs on the event loop with
``httpx.AsyncClient``. They live with their roles (:mod:`cirrusmq.producer.aio`,
:mod:`cirrusmq.consumer.aio`); this module gathers them.
"""

from __future__ import annotations

from .consumer.aio import AsyncSimpleConsumer
from .producer.aio import AsyncProducer

__all__ = ["AsyncProducer", "AsyncSimpleConsumer"]
