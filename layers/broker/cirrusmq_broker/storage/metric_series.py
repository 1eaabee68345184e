"""Reading back the metrics the functions emit: CloudWatch ``GetMetricData``, one call for
every series a request asks for (never one per series or per point).

On AWS CloudWatch extracts the EMF documents the functions log; the local stack forwards the
same datapoints to moto's CloudWatch (``cirrusmq_local.telemetry``), so this one reader
serves both. A query names its dimensions sorted by name, the order the forwarder puts them
in: moto (5.x) matches a query's dimension list only in the order the datapoints were put
with (CloudWatch itself does not care).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_QUERIES = 500
"""GetMetricData's limit of metric queries per call."""


@dataclass(frozen=True)
class SeriesQuery:
    """One metric with its exact dimensions (CloudWatch matches the whole set)."""

    name: str
    dimensions: dict[str, str]
    stat: str = "Maximum"


class MetricSeriesReader:
    def __init__(self, client: Any, namespace: str) -> None:
        self._client = client
        self._namespace = namespace

    def read(
        self, queries: list[SeriesQuery], *, start_ms: int, end_ms: int, period_s: int
    ) -> list[dict[int, float]]:
        """Per query (same order), its values by period start (epoch ms) in
        ``[start_ms, end_ms)``: one GetMetricData call (at most :data:`MAX_QUERIES`)."""
        if not queries:
            return []
        if len(queries) > MAX_QUERIES:
            raise ValueError(f"at most {MAX_QUERIES} series per read")
        answer = self._client.get_metric_data(
            MetricDataQueries=[
                {
                    "Id": f"q{i}",
                    "ReturnData": True,
                    "MetricStat": {
                        "Metric": {
                            "Namespace": self._namespace,
                            "MetricName": q.name,
                            "Dimensions": [
                                {"Name": k, "Value": v} for k, v in sorted(q.dimensions.items())
                            ],
                        },
                        "Period": period_s,
                        "Stat": q.stat,
                    },
                }
                for i, q in enumerate(queries)
            ],
            StartTime=datetime.fromtimestamp(start_ms / 1000, UTC),
            EndTime=datetime.fromtimestamp(end_ms / 1000, UTC),
            ScanBy="TimestampAscending",
        )
        found: list[dict[int, float]] = [{} for _ in queries]
        for result in answer.get("MetricDataResults") or []:
            index = int(str(result["Id"])[1:])
            stamps, values = result.get("Timestamps") or [], result.get("Values") or []
            for stamp, value in zip(stamps, values, strict=True):
                found[index][int(stamp.timestamp() * 1000)] = float(value)
        return found


__all__ = ["MAX_QUERIES", "MetricSeriesReader", "SeriesQuery"]
