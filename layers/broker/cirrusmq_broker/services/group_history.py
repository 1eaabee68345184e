"""Which consumer groups exist (the group list), and a group's metrics over the last
minutes, per minute: lag, age of the oldest unacked message and messages in flight per
topic, dead letters per group — the series the GroupMetricsFunction emits
(``functions/group_metrics``), read back for the console's lag chart and the SDK.

AWS calls: the list is one Scan of the groups table's keys-only ``by_topic`` index (a page
per MB of group-queue keys); a history is that Scan (the group's topics) and one
GetMetricData (every series of the group at once, at most :data:`MAX_TOPICS` topics so the
answer fits in one page).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidRequest
from ..storage.group_catalog import GroupCatalog
from ..storage.metric_series import MetricSeriesReader, SeriesQuery
from ..validation import check_group_name, check_topic_name

PERIOD_S = 60
"""One point per minute, the GroupMetricsFunction's schedule."""
MAX_MINUTES = 360
MAX_TOPICS = 50
"""Topics per request: 3 series each (+1) and up to 360 points stay within one
GetMetricData page (100,800 datapoints) and its 500 queries."""
TOPIC_SERIES = (
    ("Lag", "lag"),
    ("OldestUnackedAge", "oldest_unacked_age_s"),
    ("InFlight", "in_flight"),
)


@dataclass(frozen=True)
class TopicPoint:
    timestamp: int
    """Start of the minute, epoch ms."""
    lag: float | None
    oldest_unacked_age_s: float | None
    in_flight: float | None


@dataclass(frozen=True)
class TopicHistory:
    topic: str
    points: list[TopicPoint]
    """The minutes with at least one value, oldest first."""


@dataclass(frozen=True)
class GroupHistory:
    group: str
    start: int
    end: int
    period_s: int
    topics: list[TopicHistory]
    dead_letters: list[tuple[int, float]]
    """(minute start, dead letters), oldest first."""
    truncated: bool
    """More topics than :data:`MAX_TOPICS`: only the first ones (by name) are read."""


class GroupHistoryService:
    def __init__(
        self,
        *,
        catalog: GroupCatalog,
        reader: MetricSeriesReader,
        service: str,
        clock: Callable[[], int],
    ) -> None:
        self._catalog = catalog
        self._reader = reader
        self._service = service
        self._clock = clock

    def groups(self) -> dict[str, set[str]]:
        """Every group (with state or a subscription) → its topics."""
        return self._catalog.groups()

    @staticmethod
    def check(group: str, minutes: int, topic: str | None = None) -> None:
        """Raise a 400 error for a bad group or topic name or a window out of bounds."""
        check_group_name(group)
        if topic is not None:
            check_topic_name(topic)
        if not 1 <= minutes <= MAX_MINUTES:
            raise InvalidRequest(f"minutes must be between 1 and {MAX_MINUTES}")

    def history(
        self,
        group: str,
        minutes: int,
        may_read: Callable[[str], bool] = lambda _: True,
        *,
        topic: str | None = None,
    ) -> GroupHistory:
        """``group``'s series over the last ``minutes`` (1..:data:`MAX_MINUTES`), on its
        topics ``may_read`` allows (only ``topic``, if given)."""
        self.check(group, minutes, topic)
        topics = [
            t
            for t in self._catalog.groups().get(group, set())
            if may_read(t) and (topic is None or t == topic)
        ]
        period_ms = PERIOD_S * 1000
        now = self._clock()
        end = now - now % period_ms + period_ms  # the current minute included
        start = end - minutes * period_ms
        names = sorted(set(topics))
        chosen = names[:MAX_TOPICS]
        queries = [
            SeriesQuery(metric, {"service": self._service, "Group": group, "Topic": topic})
            for topic in chosen
            for metric, _ in TOPIC_SERIES
        ]
        queries.append(SeriesQuery("DeadLetters", {"service": self._service, "Group": group}))
        series = self._reader.read(queries, start_ms=start, end_ms=end, period_s=PERIOD_S)
        histories = []
        for i, topic in enumerate(chosen):
            lag, age, inflight = series[3 * i : 3 * i + 3]
            stamps = sorted(set(lag) | set(age) | set(inflight))
            points = [TopicPoint(t, lag.get(t), age.get(t), inflight.get(t)) for t in stamps]
            histories.append(TopicHistory(topic, points))
        dead = sorted(series[-1].items())
        return GroupHistory(group, start, end, PERIOD_S, histories, dead, len(names) > len(chosen))


__all__ = ["GroupHistory", "GroupHistoryService", "TopicHistory", "TopicPoint"]
