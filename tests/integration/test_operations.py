"""Through a local stack over real HTTP: the functions' JSON logs are shown (followed) and
kept with the request keys and never a secret; their EMF metrics are kept and read back from
``GET /local/metrics``, the group metrics included; the SDK's correlation id is echoed and
logged on both sides."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import b64, make_topic, receive, send, signed_client
from cirrusmq.credentials import Credentials
from cirrusmq.errors import MQError
from cirrusmq.transport import CORRELATION_HEADER, Transport
from cirrusmq_local import LocalStack

SECRET = "operations-test-secret-0123456789abcdefXYZ"


@pytest.fixture(scope="module")
def shown() -> list[str]:
    return []


@pytest.fixture(scope="module")
def stack(shown: list[str]) -> Iterator[LocalStack]:
    local = LocalStack(
        schedules=False,
        credentials=Credentials("ops-admin", SECRET),
        function_logs=shown.append,
        follow_logs=True,
    )
    try:
        yield local.start()
    finally:
        local.stop()


@pytest.fixture
def api(stack: LocalStack) -> Iterator[httpx.Client]:
    with signed_client(stack) as client:
        yield client


def lines_of(stack: LocalStack, function: str) -> list[dict]:
    return [json.loads(line.text) for line in stack.telemetry.logs(function, limit=1000)]


def local_metric(stack: LocalStack, **query: str) -> list[dict]:
    response = httpx.get(f"{stack.endpoint}/local/metrics", params=query)
    assert response.status_code == 200, response.text
    return response.json()["datapoints"]


def test_requests_are_logged_shown_and_measured_without_a_secret(stack, api, shown):
    make_topic(api, "orders", queues=1)
    answer = api.post(
        "/v1/topics/orders/messages",
        json={"messages": [{"body": b64(b"m%d" % i)} for i in range(3)]},
        headers={CORRELATION_HEADER: "ops-corr-1"},
    )
    assert answer.status_code == 200
    assert answer.headers[CORRELATION_HEADER] == "ops-corr-1"
    [line] = [
        x for x in lines_of(stack, "ProduceFunction") if x.get("correlation_id") == "ops-corr-1"
    ]
    assert line["message"] == "request" and line["status"] == 200
    assert (line["access_key"], line["route"], line["request_kind"], line["messages"]) == (
        "ops-admin",
        "POST /v1/topics/{topic}/messages",
        "SendMessages",
        3,
    )
    assert line["request_id"] and line["function_request_id"]
    assert any("ops-corr-1" in text and text.startswith("ProduceFunction ") for text in shown)
    sent = local_metric(stack, name="Messages", RequestKind="SendMessages", stat="Sum")
    assert sum(p["value"] for p in sent) == 3
    kept = [line.text for line in stack.telemetry.logs(limit=1000)]
    assert kept and not any(SECRET in text for text in kept + shown)
    assert not any(SECRET in json.dumps(s) for s in stack.telemetry.metrics.series())


def test_the_group_metrics_are_kept_for_the_lag_chart(stack, api):
    make_topic(api, "billing", queues=2)
    send(api, "billing", *[{"body": b64(b"b%d" % i)} for i in range(5)])
    got = receive(api, "billing-group", "billing", max_messages=2)
    assert len(got) == 2
    result = stack.run_schedule("GroupMetricsFunction", "EmitGroupMetrics")
    assert result == {"groups": 1, "topics": 1}
    by_group = {"Group": "billing-group", "Topic": "billing"}
    assert local_metric(stack, name="Lag", **by_group)[-1]["value"] == 5
    assert local_metric(stack, name="InFlight", **by_group)[-1]["value"] == 2
    assert local_metric(stack, name="OldestUnackedAge", **by_group)[-1]["value"] >= 0
    assert local_metric(stack, name="DeadLetters", Group="billing-group")[-1]["value"] == 0
    assert local_metric(stack, name="Lag")[-1]["value"] == 5  # the service-wide series
    [run] = [x for x in lines_of(stack, "GroupMetricsFunction") if x.get("message") == "run"]
    assert run["result"] == {"groups": 1, "topics": 1}


def test_the_sdk_correlation_id_names_a_failed_call_on_both_sides(stack, caplog):
    transport = Transport(stack.endpoint, stack.credentials)
    try:
        with caplog.at_level(logging.DEBUG, "cirrusmq.transport"), pytest.raises(MQError) as err:
            transport.request("GET", "/v1/topics/no-such-topic")
    finally:
        transport.close()
    correlation = err.value.correlation_id
    assert correlation and err.value.code == "TopicNotFound"
    assert correlation in caplog.text
    # a call's attempts share its id: one answered 401 RequestExpired first when an earlier
    # test moved the stack's clock (the transport then signs on the stack's clock)
    *_, line = [
        x for x in lines_of(stack, "AdminFunction") if x.get("correlation_id") == correlation
    ]
    assert (line["status"], line["error_code"]) == (404, "TopicNotFound")
    errors = local_metric(stack, name="Errors", ErrorCode="TopicNotFound", stat="Sum")
    assert sum(p["value"] for p in errors) >= 1


def test_acks_are_counted_whether_they_ride_on_a_receive_or_go_alone(stack, api):
    make_topic(api, "acked-count", queues=1)
    send(api, "acked-count", *[{"body": b64(b"a%d" % i)} for i in range(5)])
    first = receive(api, "acked-group", "acked-count", max_messages=2)
    riding = api.post(
        "/v1/groups/acked-group/receive",
        json={
            "topic": "acked-count",
            "max_messages": 3,
            "ack": [m["receipt_handle"] for m in first],
        },
    )
    assert riding.status_code == 200 and riding.json()["acks"]["acked"] == 2
    alone = api.post(
        "/v1/groups/acked-group/ack",
        json={"receipt_handles": [m["receipt_handle"] for m in riding.json()["messages"]]},
    )
    assert alone.json()["acked"] == 3
    on_receive = local_metric(stack, name="AckedMessages", RequestKind="Receive", stat="Sum")
    on_ack = local_metric(stack, name="AckedMessages", RequestKind="Ack", stat="Sum")
    assert (sum(p["value"] for p in on_receive), sum(p["value"] for p in on_ack)) == (2, 3)
    assert sum(p["value"] for p in local_metric(stack, name="AckedMessages", stat="Sum")) == 5
