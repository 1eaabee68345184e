"""Delivery to consumer groups: receive under a lease, ack, change invisible time, and the
group's status.

- receive.py: the long poll and one pass over the queues (leasing what a queue's plan
  offers).
- queue_plan.py: what one queue can deliver now: flow control, the FIFO gate.
- ack.py: acks, fast and slow paths.
- invisible.py: change_invisible.
- status.py: describe_group.
- response_size.py: what a message takes in a receive response.

Expired leases and nacks are the retries' business (services/retries/).
"""

from __future__ import annotations

from ..receipt_handles import AckOutcome, AckStatus, NackOutcome
from .service import ConsumeService
from .status import GroupDescription

__all__ = ["AckOutcome", "AckStatus", "ConsumeService", "GroupDescription", "NackOutcome"]
