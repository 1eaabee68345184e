"""Consumer group state in GroupsTable: per (group, topic, queue) a small summary and one
item per open lease; per (group, topic) the subscription. keys.py names every sort key of
the table; store.py is the one object the services use."""

from __future__ import annotations

from .lease_acks import LeaseAck
from .store import GroupStateStore

__all__ = ["GroupStateStore", "LeaseAck"]
