"""The consumer groups a key may see, and a group's metrics per minute (``GET /v1/groups``,
``GET /v1/groups/{group}/metrics``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..consumer.paths import group_path
from ..transport import Transport
from ..wire import read_bool, read_int, read_list, read_str, read_str_list

__all__ = [
    "GroupMetrics",
    "GroupSummary",
    "MetricPoint",
    "TopicMetrics",
    "group_metrics",
    "list_groups",
]


@dataclass(frozen=True)
class GroupSummary:
    group: str
    topics: tuple[str, ...]
    """The topics it has state or a subscription on that the key may consume as it."""


@dataclass(frozen=True)
class MetricPoint:
    timestamp: int
    """Start of the minute, epoch ms."""
    lag: float | None
    oldest_unacked_age_seconds: float | None
    in_flight: float | None


@dataclass(frozen=True)
class TopicMetrics:
    topic: str
    points: tuple[MetricPoint, ...]


@dataclass(frozen=True)
class GroupMetrics:
    """A group's series as the GroupMetricsFunction emitted them, one point per minute."""

    group: str
    start: int
    end: int
    period_seconds: int
    topics: tuple[TopicMetrics, ...]
    dead_letters: tuple[tuple[int, float], ...]
    """(minute start, dead letters), oldest first."""
    truncated: bool

    def lag(self) -> list[tuple[int, float]]:
        """The group's lag per minute, summed over its topics."""
        total: dict[int, float] = {}
        for topic in self.topics:
            for p in topic.points:
                if p.lag is not None:
                    total[p.timestamp] = total.get(p.timestamp, 0) + p.lag
        return sorted(total.items())


def _number(data: Any, name: str) -> float | None:
    value = data.get(name) if isinstance(data, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def list_groups(transport: Transport) -> list[GroupSummary]:
    body = transport.request("GET", "/v1/groups")
    return [
        GroupSummary(read_str(g, "group"), read_str_list(g, "topics"))
        for g in read_list(body, "groups")
    ]


def group_metrics(
    transport: Transport, group: str, *, minutes: int = 60, topic: str | None = None
) -> GroupMetrics:
    params = {"minutes": str(minutes)}
    if topic is not None:
        params["topic"] = topic
    body = transport.request("GET", group_path(group, "metrics"), params=params)
    return GroupMetrics(
        read_str(body, "group"),
        read_int(body, "start"),
        read_int(body, "end"),
        read_int(body, "period_seconds"),
        tuple(
            TopicMetrics(
                read_str(t, "topic"),
                tuple(
                    MetricPoint(
                        read_int(p, "timestamp"),
                        _number(p, "lag"),
                        _number(p, "oldest_unacked_age_seconds"),
                        _number(p, "in_flight"),
                    )
                    for p in read_list(t, "points")
                ),
            )
            for t in read_list(body, "topics")
        ),
        tuple(
            (read_int(p, "timestamp"), _number(p, "dead_letters") or 0.0)
            for p in read_list(body, "dead_letters")
        ),
        read_bool(body, "truncated", default=False),
    )
