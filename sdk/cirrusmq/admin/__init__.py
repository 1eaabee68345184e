"""Operating the service: :class:`Admin` (topics, groups, offsets, dead letters, access keys).

``client`` is the client, ``models`` what it returns, ``offsets`` and ``dead_letters`` the
requests and results of rewinds and dead letters, ``bootstrap`` the first admin key of a
deployed stack (with AWS credentials, not the API).
"""

from __future__ import annotations

from .client import Admin
from .dead_letters import DeadLetter, DeadLetterPage, RedriveSummary
from .groups import GroupMetrics, GroupSummary, MetricPoint, TopicMetrics
from .key_lookup import KeyPage
from .models import (
    AccessKey,
    AccessKeySecret,
    GroupDescription,
    GroupQueue,
    Permissions,
    QueueOffsets,
    SubscribeGrant,
    Subscription,
    Topic,
    TopicDescription,
    TraceEvent,
)
from .offsets import OffsetReset, QueueOffsetInfo, QueueReset

__all__ = [
    "AccessKey",
    "AccessKeySecret",
    "Admin",
    "DeadLetter",
    "DeadLetterPage",
    "GroupDescription",
    "GroupMetrics",
    "GroupQueue",
    "GroupSummary",
    "KeyPage",
    "MetricPoint",
    "OffsetReset",
    "Permissions",
    "QueueOffsetInfo",
    "QueueOffsets",
    "QueueReset",
    "RedriveSummary",
    "SubscribeGrant",
    "Subscription",
    "Topic",
    "TopicDescription",
    "TraceEvent",
    "TopicMetrics",
]
