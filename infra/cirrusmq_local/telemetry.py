"""What the functions print, kept by the local stack: their JSON log lines, and the metrics of
their EMF documents in a small in-memory store to query (``GET /local/metrics``, tests) and
forwarded to moto's CloudWatch, where the API reads them back like on AWS (the group
metrics route behind the console's lag chart).

On AWS, CloudWatch Logs receives the lines and extracts the EMF metrics; here every line a
function writes during an invocation (``cirrusmq_broker.telemetry.write_line``) reaches
:meth:`LocalTelemetry.write`. Datapoints are stamped with the broker clock (so
``LocalStack.advance_time`` moves them as it moves everything else) and kept for
:data:`KEEP_SECONDS`. The forwarding runs on a thread of its own (:class:`MetricForwarder`:
a ``PutMetricData`` per batch of up to 1000 datapoints, never on a request's path).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cirrusmq_broker import clock

__all__ = ["Datapoint", "LocalTelemetry", "LogLine", "MetricForwarder", "MetricStore"]

log = logging.getLogger(__name__)

KEEP_SECONDS = 3 * 3600
"""How long datapoints are kept (the console charts the last hour)."""
MAX_DATAPOINTS = 200_000
MAX_LOG_LINES = 5_000
STATISTICS = ("Sum", "Maximum", "Minimum", "Average", "SampleCount")
PUT_BATCH = 1000
"""CloudWatch's limit of datapoints per PutMetricData."""
QUIET_LEVELS = frozenset({"ERROR", "CRITICAL"})
"""Log levels shown even when the stack does not follow the logs (``cirrusmq dev`` without
``--verbose``)."""


@dataclass(frozen=True)
class Datapoint:
    """One value of one metric, as CloudWatch would record it from an EMF document."""

    namespace: str
    name: str
    dimensions: tuple[tuple[str, str], ...]
    """Sorted (name, value) pairs, ``service`` included."""
    value: float
    unit: str
    timestamp_ms: int
    """The broker clock when the line was written."""


@dataclass(frozen=True)
class LogLine:
    """One log line of a function (EMF documents are not kept as lines)."""

    function: str
    """The function's logical id in template.yaml."""
    text: str
    timestamp_ms: int
    level: str | None
    """The ``level`` of a JSON line (None for other text)."""


class MetricStore:
    """Datapoints of the EMF documents the functions wrote, queryable like CloudWatch's
    ``GetMetricStatistics`` (one metric, exact dimensions, a period and a statistic)."""

    def __init__(self, *, keep_seconds: int = KEEP_SECONDS, max_points: int = MAX_DATAPOINTS):
        self.keep_seconds = keep_seconds
        self._points: deque[Datapoint] = deque(maxlen=max_points)
        self._lock = threading.Lock()

    def add_document(self, document: Mapping[str, Any], *, timestamp_ms: int) -> list[Datapoint]:
        """Record the datapoints of one EMF document (one per metric value and dimension
        set); returns them. A document that is not EMF adds nothing."""
        meta = document.get("_aws")
        if not isinstance(meta, Mapping):
            return []
        points = []
        for directive in meta.get("CloudWatchMetrics") or []:
            namespace = str(directive.get("Namespace", ""))
            for dimension_set in directive.get("Dimensions") or [[]]:
                dims = tuple(sorted((str(d), str(document.get(d, ""))) for d in dimension_set))
                for metric in directive.get("Metrics") or []:
                    name = str(metric.get("Name", ""))
                    values = document.get(name)
                    for value in values if isinstance(values, list) else [values]:
                        if isinstance(value, int | float) and not isinstance(value, bool):
                            unit = str(metric.get("Unit", "None"))
                            points.append(
                                Datapoint(namespace, name, dims, value, unit, timestamp_ms)
                            )
        with self._lock:
            self._points.extend(points)
            self._expire(timestamp_ms)
        return points

    def _expire(self, now_ms: int) -> None:
        floor = now_ms - self.keep_seconds * 1000
        while self._points and self._points[0].timestamp_ms < floor:
            self._points.popleft()

    def series(self) -> list[dict[str, Any]]:
        """Every (namespace, metric, dimensions) recorded, sorted."""
        with self._lock:
            keys = {(p.namespace, p.name, p.dimensions) for p in self._points}
        return [
            {"namespace": ns, "name": name, "dimensions": dict(dims)}
            for ns, name, dims in sorted(keys)
        ]

    def query(
        self,
        name: str,
        dimensions: Mapping[str, str] | None = None,
        *,
        statistic: str = "Maximum",
        period_s: int = 60,
        since_ms: int | None = None,
        until_ms: int | None = None,
        namespace: str = "CirrusMQ",
    ) -> list[dict[str, Any]]:
        """``[{"timestamp": ms, "value": v}, ...]`` per ``period_s`` bucket, oldest first, of
        the metric whose dimensions besides ``service`` are exactly ``dimensions`` (none:
        the service-wide series)."""
        if statistic not in STATISTICS:
            raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}")
        if period_s < 1:
            raise ValueError("period_s must be at least 1")
        wanted = dict(dimensions or {})
        with self._lock:
            points = [
                p
                for p in self._points
                if p.name == name
                and p.namespace == namespace
                and {k: v for k, v in p.dimensions if k != "service"} == wanted
                and (since_ms is None or p.timestamp_ms >= since_ms)
                and (until_ms is None or p.timestamp_ms < until_ms)
            ]
        buckets: dict[int, list[float]] = {}
        for point in points:
            start = point.timestamp_ms - point.timestamp_ms % (period_s * 1000)
            buckets.setdefault(start, []).append(point.value)
        return [
            {"timestamp": start, "value": _statistic(statistic, values)}
            for start, values in sorted(buckets.items())
        ]


def _statistic(name: str, values: list[float]) -> float:
    if name == "Sum":
        return sum(values)
    if name == "Maximum":
        return max(values)
    if name == "Minimum":
        return min(values)
    if name == "Average":
        return sum(values) / len(values)
    return float(len(values))


class MetricForwarder:
    """Sends datapoints to a CloudWatch client (moto's) from a thread of its own, in
    ``PutMetricData`` calls of up to :data:`PUT_BATCH` datapoints of one namespace; a failed
    call is logged and its datapoints dropped (metrics are best effort)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._pending: queue.Queue[Datapoint | None] = queue.Queue()
        self._thread = threading.Thread(
            target=self._run, name="cirrusmq-metric-forwarder", daemon=True
        )
        self._thread.start()

    def put(self, points: Iterable[Datapoint]) -> None:
        for point in points:
            self._pending.put(point)

    def flush(self) -> None:
        """Return once every datapoint put so far was sent (or dropped)."""
        self._pending.join()

    def stop(self) -> None:
        """Send what is pending, then end the thread."""
        self._pending.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            first = self._pending.get()
            batch = [first]
            while len(batch) < PUT_BATCH:
                try:
                    batch.append(self._pending.get_nowait())
                except queue.Empty:
                    break
            points = [p for p in batch if p is not None]
            try:
                self._send(points)
            except Exception:  # best effort: a stopped moto, a bad value
                log.warning("could not forward %d datapoints to CloudWatch", len(points))
            finally:
                for _ in batch:
                    self._pending.task_done()
            if None in batch:
                return

    def _send(self, points: list[Datapoint]) -> None:
        by_namespace: dict[str, list[dict[str, Any]]] = {}
        for p in points:
            by_namespace.setdefault(p.namespace, []).append(
                {
                    "MetricName": p.name,
                    # sorted by name, the order the API's reader queries them in (moto
                    # matches dimension lists in order)
                    "Dimensions": [{"Name": k, "Value": v} for k, v in p.dimensions],
                    "Value": float(p.value),
                    "Unit": p.unit,
                    "Timestamp": datetime.fromtimestamp(p.timestamp_ms / 1000, UTC),
                }
            )
        for namespace, data in by_namespace.items():
            self._client.put_metric_data(Namespace=namespace, MetricData=data)


class LocalTelemetry:
    """The sink of every function's output: log lines (kept, shown through ``echo`` when
    ``follow`` or when their level is in :data:`QUIET_LEVELS`) and EMF metrics (kept in
    :attr:`metrics`)."""

    def __init__(
        self,
        *,
        echo: Callable[[str], None] | None = None,
        follow: bool = False,
        max_lines: int = MAX_LOG_LINES,
    ) -> None:
        self.echo = echo
        self.follow = follow
        self.metrics = MetricStore()
        self.forwarder: MetricForwarder | None = None
        """Where the datapoints also go (set by the stack once moto runs)."""
        self._lines: deque[LogLine] = deque(maxlen=max_lines)
        self._lock = threading.Lock()

    def sink(self, function: str) -> Callable[[str], None]:
        """Where ``function``'s lines go."""
        return lambda text: self.write(function, text)

    def write(self, function: str, text: str) -> None:
        """Take one line a function wrote."""
        now = clock.now_ms()
        document = _json_object(text)
        if document is not None and "_aws" in document:
            points = self.metrics.add_document(document, timestamp_ms=now)
            if self.forwarder is not None:
                self.forwarder.put(points)
            return
        level = str(document.get("level")) if document and "level" in document else None
        with self._lock:
            self._lines.append(LogLine(function, text, now, level))
        if self.echo is not None and (self.follow or level in QUIET_LEVELS):
            self.echo(f"{function} {text}")

    def logs(self, function: str | None = None, *, limit: int = 100) -> list[LogLine]:
        """The newest ``limit`` log lines (of ``function`` only, if given), oldest first."""
        with self._lock:
            lines: Iterable[LogLine] = list(self._lines)
        chosen = [line for line in lines if function is None or line.function == function]
        return chosen[-limit:] if limit > 0 else []


def _json_object(text: str) -> dict[str, Any] | None:
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
