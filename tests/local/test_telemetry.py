"""The local stack's copy of what the functions write: EMF metrics queryable like CloudWatch,
log lines kept and shown (errors always, everything when following), the /local routes."""

from __future__ import annotations

import json

import pytest
from cirrusmq_broker import clock, telemetry
from cirrusmq_local.local_routes import LocalRoutes
from cirrusmq_local.telemetry import PUT_BATCH, LocalTelemetry, MetricForwarder, MetricStore


def emf(**values: float) -> dict:
    """What emit_metrics writes for a group: by group and topic, and for the service."""
    lines: list[str] = []
    with telemetry.capture(lines.append):
        telemetry.emit_metrics(
            {name: ("Count", value) for name, value in values.items()},
            [{"Group": "g", "Topic": "t"}, {}],
        )
    return json.loads(lines[0])


def test_emf_datapoints_are_queried_by_exact_dimensions_period_and_statistic():
    store = MetricStore()
    store.add_document(emf(Lag=5, InFlight=1), timestamp_ms=60_000)
    store.add_document(emf(Lag=7, InFlight=0), timestamp_ms=90_000)
    store.add_document(emf(Lag=2, InFlight=0), timestamp_ms=125_000)
    by_group = {"Group": "g", "Topic": "t"}
    assert store.query("Lag", by_group) == [
        {"timestamp": 60_000, "value": 7},
        {"timestamp": 120_000, "value": 2},
    ]
    assert store.query("Lag", by_group, statistic="Sum", period_s=120) == [
        {"timestamp": 0, "value": 12},  # 60 s and 90 s fall in [0, 120 s)
        {"timestamp": 120_000, "value": 2},
    ]
    assert store.query("Lag", statistic="Average", since_ms=100_000) == [
        {"timestamp": 120_000, "value": 2}
    ]  # the service-wide series: no dimension besides service
    assert store.query("Lag", {"Group": "g"}) == []  # dimensions match exactly
    assert {"namespace": "CirrusMQ", "name": "InFlight", "dimensions": {"service": "cirrusmq"}} in (
        store.series()
    )


def test_datapoints_older_than_the_kept_window_are_dropped():
    store = MetricStore(keep_seconds=60)
    store.add_document(emf(Lag=1), timestamp_ms=0)
    store.add_document(emf(Lag=2), timestamp_ms=61_000)
    assert [p["value"] for p in store.query("Lag")] == [2]


def test_log_lines_are_kept_and_shown_errors_always_the_rest_when_following():
    shown: list[str] = []
    quiet = LocalTelemetry(echo=shown.append)
    info = json.dumps({"level": "INFO", "message": "request"})
    error = json.dumps({"level": "ERROR", "message": "unhandled error"})
    for line in (info, error, json.dumps(emf(Lag=1))):
        quiet.write("ConsumeFunction", line)
    assert [x.text for x in quiet.logs()] == [info, error]  # the EMF line went to metrics
    assert shown == [f"ConsumeFunction {error}"]
    assert quiet.metrics.query("Lag")
    following = LocalTelemetry(echo=shown.append, follow=True)
    following.write("AdminFunction", info)
    assert shown[-1] == f"AdminFunction {info}"
    assert following.logs("ConsumeFunction") == []


def test_the_local_metrics_route_answers_a_series_and_refuses_bad_parameters():
    local = LocalTelemetry()
    local.metrics.add_document(emf(Lag=4), timestamp_ms=clock.now_ms())
    routes = LocalRoutes(local)
    answer = routes.answer("GET", "/local/metrics", "name=Lag&Group=g&Topic=t&period=60")
    assert answer.status == 200
    body = json.loads(answer.body)
    assert body["dimensions"] == {"Group": "g", "Topic": "t"}
    assert [p["value"] for p in body["datapoints"]] == [4]
    listed = json.loads(routes.answer("GET", "/local/metrics", "").body)["series"]
    assert {"Lag"} == {s["name"] for s in listed}


@pytest.mark.parametrize(
    "query",
    ["name=Lag&stat=Median", "name=Lag&period=0", "name=Lag&minutes=x", "name=Lag&minutes=9999"],
)
def test_bad_parameters_are_400(query):
    answer = LocalRoutes(LocalTelemetry()).answer("GET", "/local/metrics", query)
    assert answer.status == 400
    assert json.loads(answer.body)["code"] == "InvalidRequest"


def test_only_get_on_known_local_routes():
    routes = LocalRoutes(LocalTelemetry())
    assert routes.answer("POST", "/local/metrics", "").status == 405
    assert routes.answer("GET", "/local/other", "").status == 404
    assert routes.answer("GET", "/local/logs", "limit=0").status == 400


class RecordingCloudWatch:
    """Takes PutMetricData calls; fails the first one when asked."""

    def __init__(self, fail_first: bool = False) -> None:
        self.calls: list[dict] = []
        self.fail_first = fail_first

    def put_metric_data(self, **request) -> None:
        if self.fail_first:
            self.fail_first = False
            raise RuntimeError("moto is gone")
        self.calls.append(request)


def test_the_datapoints_are_forwarded_in_batches_with_their_dimensions_and_time():
    client = RecordingCloudWatch()
    local = LocalTelemetry()
    local.forwarder = MetricForwarder(client)
    try:
        local.write("GroupMetricsFunction", json.dumps(emf(Lag=5, InFlight=2)))
        local.forwarder.flush()
        [call] = client.calls
        assert call["Namespace"] == "CirrusMQ"
        lag = [d for d in call["MetricData"] if d["MetricName"] == "Lag"]
        assert [d["Dimensions"] for d in lag] == [
            [
                {"Name": "Group", "Value": "g"},
                {"Name": "Topic", "Value": "t"},
                {"Name": "service", "Value": "cirrusmq"},
            ],
            [{"Name": "service", "Value": "cirrusmq"}],
        ]
        assert {d["Value"] for d in lag} == {5.0} and lag[0]["Unit"] == "Count"
        now = clock.now_ms()
        assert abs(lag[0]["Timestamp"].timestamp() * 1000 - now) < 60_000
        many = [
            p for _ in range(700) for p in local.metrics.add_document(emf(Lag=1), timestamp_ms=now)
        ]
        local.forwarder.put(many)  # 1400 datapoints: two calls at most 1000 each
        local.forwarder.flush()
        sizes = [len(c["MetricData"]) for c in client.calls[1:]]
        assert sum(sizes) == 1400 and max(sizes) <= PUT_BATCH
    finally:
        local.forwarder.stop()


def test_a_failed_forward_drops_its_batch_and_keeps_forwarding():
    client = RecordingCloudWatch(fail_first=True)
    forwarder = MetricForwarder(client)
    try:
        store = MetricStore()
        forwarder.put(store.add_document(emf(Lag=1), timestamp_ms=clock.now_ms()))
        forwarder.flush()
        assert client.calls == []
        forwarder.put(store.add_document(emf(Lag=2), timestamp_ms=clock.now_ms()))
        forwarder.flush()
        assert [d["Value"] for c in client.calls for d in c["MetricData"]] == [2.0, 2.0]
    finally:
        forwarder.stop()
