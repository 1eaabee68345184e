"""Sending: :class:`Producer` (threads) and :class:`AsyncProducer` (asyncio).

``send_state`` holds the bookkeeping both drive (what to seal, post, retry or park),
``accumulator`` the open batches, ``producer`` and ``aio`` the I/O.
"""

from __future__ import annotations

from .aio import AsyncProducer
from .producer import Producer

__all__ = ["AsyncProducer", "Producer"]
