"""Routes only the local stack serves (under ``/local/``): the metrics and logs the functions
wrote, which on AWS are read from CloudWatch.

- ``GET /local/metrics``: ``{"series": [{"namespace", "name", "dimensions"}, ...]}``.
- ``GET /local/metrics?name=Lag&Group=g&Topic=t&stat=Maximum&period=60&minutes=60``:
  ``{"name", "dimensions", "statistic", "period", "datapoints": [{"timestamp", "value"}]}``:
  one metric, the dimensions besides ``service`` exactly those given (none: the service-wide
  series), per ``period`` seconds over the last ``minutes`` of the broker clock.
- ``GET /local/logs?function=ConsumeFunction&limit=100``: ``{"lines": [...]}``, newest last.

Unsigned, like the moto endpoint beside it: the local stack binds 127.0.0.1 unless told
otherwise. Bad parameters are 400 ``InvalidRequest``.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from cirrusmq_broker import clock

from cirrusmq_local.events import HttpResponse
from cirrusmq_local.telemetry import STATISTICS, LocalTelemetry

__all__ = ["LocalRoutes"]

_CONTROL = frozenset({"name", "stat", "period", "minutes"})
MAX_MINUTES = 180


class LocalRoutes:
    PREFIX = "/local/"

    def __init__(self, telemetry: LocalTelemetry) -> None:
        self.telemetry = telemetry

    def answer(self, method: str, path: str, raw_query: str) -> HttpResponse:
        """The answer to a request under :data:`PREFIX`."""
        if path not in ("/local/metrics", "/local/logs"):
            return _json(404, {"code": "RouteNotFound", "message": f"no route for {path}"})
        if method != "GET":
            return _json(405, {"code": "MethodNotAllowed", "message": f"{method} {path}"})
        query = dict(parse_qsl(raw_query, keep_blank_values=True))
        try:
            body = self._metrics(query) if path == "/local/metrics" else self._logs(query)
        except ValueError as exc:
            return _json(400, {"code": "InvalidRequest", "message": str(exc)})
        return _json(200, body)

    def _metrics(self, query: dict[str, str]) -> dict[str, Any]:
        store = self.telemetry.metrics
        if "name" not in query:
            return {"series": store.series()}
        statistic = query.get("stat", "Maximum")
        if statistic not in STATISTICS:
            raise ValueError(f"stat must be one of {', '.join(STATISTICS)}")
        period = _integer(query, "period", 60, 1, 3600)
        minutes = _integer(query, "minutes", 60, 1, MAX_MINUTES)
        dimensions = {k: v for k, v in query.items() if k not in _CONTROL}
        now = clock.now_ms()
        points = store.query(
            query["name"],
            dimensions,
            statistic=statistic,
            period_s=period,
            since_ms=now - minutes * 60_000,
        )
        return {
            "name": query["name"],
            "dimensions": dimensions,
            "statistic": statistic,
            "period": period,
            "datapoints": points,
        }

    def _logs(self, query: dict[str, str]) -> dict[str, Any]:
        limit = _integer(query, "limit", 100, 1, 1000)
        lines = self.telemetry.logs(query.get("function") or None, limit=limit)
        return {
            "lines": [
                {"function": line.function, "timestamp": line.timestamp_ms, "text": line.text}
                for line in lines
            ]
        }


def _integer(query: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    text = query.get(name)
    if text is None:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        raise ValueError(f"{name} must be an integer from {low} to {high}")
    return int(text)


def _json(status: int, body: dict[str, Any]) -> HttpResponse:
    return HttpResponse(status, [("Content-Type", "application/json")], json.dumps(body).encode())
