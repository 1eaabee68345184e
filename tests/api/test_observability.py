"""Every request logs one JSON line with its keys and emits its request kind's EMF metrics;
the correlation id is echoed; scheduled runs are logged and measured likewise."""

from __future__ import annotations

import gc
import json
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_api import heap
from cirrusmq_api.app import create_app
from cirrusmq_api.observability import (
    CORRELATION_HEADER,
    REQUEST_KINDS,
    REQUEST_METRICS,
    count_messages,
    observe,
)
from cirrusmq_broker import telemetry
from cirrusmq_broker.errors import Throttled, TopicNotFound
from cirrusmq_local.template import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"

CONTEXT = types.SimpleNamespace(aws_request_id="fn-req-1")


@contextmanager
def captured() -> Iterator[list[dict]]:
    """Every line written meanwhile, parsed."""
    lines: list[str] = []
    with telemetry.capture(lines.append):
        parsed: list[dict] = []
        yield parsed
    parsed.extend(json.loads(line) for line in lines)


def event(method: str, path: str, route: str, headers: dict | None = None, body: str = "") -> dict:
    return {
        "version": "2.0",
        "routeKey": f"{method} {route}",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {"content-type": "application/json", **(headers or {})},
        "body": body,
        "requestContext": {
            "http": {"method": method, "path": path},
            "requestId": "gw-req-1",
            "stage": "$default",
        },
        "isBase64Encoded": False,
    }


def health_app(action=lambda: None):  # noqa: ANN201, ANN001
    """An app whose only route (the unsigned health check) runs ``action``."""
    router = APIGatewayHttpRouter()

    @router.get("/v1/health")
    def health() -> dict:
        action()
        return {"status": "ok"}

    return create_app(router)


def health(headers: dict | None = None) -> dict:
    return event("GET", "/v1/health", "/v1/health", headers)


def request_line(lines: list[dict]) -> dict:
    [line] = [x for x in lines if x.get("message") == "request"]
    return line


def metric_documents(lines: list[dict]) -> list[dict]:
    return [x for x in lines if "_aws" in x]


def test_a_request_logs_one_json_line_with_its_keys_and_echoes_the_correlation_id():
    with captured() as lines:
        answer = health_app().resolve(health({CORRELATION_HEADER: "corr-1"}), CONTEXT)
    assert answer["statusCode"] == 200
    assert answer["headers"][CORRELATION_HEADER] == "corr-1"
    line = request_line(lines)
    assert line["level"] == "INFO"
    assert line["service"] == "cirrusmq"
    assert line["request_id"] == "gw-req-1"
    assert line["function_request_id"] == "fn-req-1"
    assert line["route"] == "GET /v1/health"
    assert line["request_kind"] == "Health"
    assert line["correlation_id"] == "corr-1"
    assert line["status"] == 200
    assert "access_key" not in line  # unsigned route


def test_a_missing_or_unacceptable_correlation_id_is_replaced_by_a_new_one():
    ids = []
    for headers in ({}, {CORRELATION_HEADER: 'two words\n{"level": "ERROR"}'}):
        with captured() as lines:
            answer = health_app().resolve(health(headers), CONTEXT)
        ids.append(answer["headers"][CORRELATION_HEADER])
        assert request_line(lines)["correlation_id"] == ids[-1]
    assert all(len(i) == 32 and i.isalnum() for i in ids) and ids[0] != ids[1]


def test_log_lines_written_by_a_route_carry_the_request_keys():
    app = health_app(lambda: telemetry.logger.info("inside"))
    with captured() as lines:
        app.resolve(health({CORRELATION_HEADER: "corr-2"}), CONTEXT)
    [inside] = [x for x in lines if x.get("message") == "inside"]
    assert (inside["correlation_id"], inside["route"]) == ("corr-2", "GET /v1/health")


def test_a_resolve_nested_in_another_keeps_each_ones_keys():
    """Keys live in a context variable, not on Powertools' shared formatter."""
    inner = health_app()
    outer = health_app(lambda: inner.resolve(health({CORRELATION_HEADER: "inner"}), CONTEXT))
    with captured() as lines:
        outer.resolve(health({CORRELATION_HEADER: "outer"}), CONTEXT)
    requests = [x["correlation_id"] for x in lines if x.get("message") == "request"]
    assert requests == ["inner", "outer"]


def test_every_request_kind_emits_its_metrics_by_kind_and_for_the_service():
    def send() -> dict:  # what the resolver answers after the route counted its messages
        count_messages(3)
        return {"statusCode": 200, "headers": {}, "body": '{"receipts": []}'}

    body = '{"messages": []}'
    sent = event("POST", "/v1/topics/t/messages", "/v1/topics/{topic}/messages", body=body)
    with captured() as lines:
        observe(sent, CONTEXT, send, lambda: "AKIDEXAMPLE")
    [document] = metric_documents(lines)
    directive = document["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "CirrusMQ"
    assert sorted(map(sorted, directive["Dimensions"])) == [
        ["RequestKind", "service"],
        ["service"],
    ]
    assert [m["Name"] for m in directive["Metrics"]] == list(REQUEST_METRICS)
    assert document["RequestKind"] == "SendMessages"
    assert document["Requests"] == [1.0] and document["Messages"] == [3.0]
    assert document["RequestBytes"] == [len(body)]
    assert document["ResponseBytes"] == [len('{"receipts": []}')]
    assert document["Errors"] == document["Faults"] == document["Throttles"] == [0.0]
    line = request_line(lines)
    assert (line["access_key"], line["messages"], line["request_kind"]) == (
        "AKIDEXAMPLE",
        3,
        "SendMessages",
    )


@pytest.mark.parametrize(
    ("error", "status", "code", "counted"),
    [
        (TopicNotFound("no topic t"), 404, "TopicNotFound", "ClientErrors"),
        (Throttled("slow down"), 429, "Throttled", "Throttles"),
        (RuntimeError("bug"), 500, "InternalError", "Faults"),
    ],
)
def test_errors_are_counted_by_code(error, status, code, counted):
    def fail() -> None:
        raise error

    with captured() as lines:
        answer = health_app(fail).resolve(health(), CONTEXT)
    assert answer["statusCode"] == status
    main, by_code = metric_documents(lines)
    assert main["Errors"] == [1.0] and main[counted] == [1.0]
    assert by_code["ErrorCode"] == code and by_code["Errors"] == [1.0]
    assert sorted(map(sorted, by_code["_aws"]["CloudWatchMetrics"][0]["Dimensions"])) == [
        ["ErrorCode", "RequestKind", "service"],
        ["ErrorCode", "service"],
    ]
    line = request_line(lines)
    assert (line["status"], line["error_code"]) == (status, code)
    assert line["level"] == ("WARNING" if status >= 500 else "INFO")


def test_a_scheduled_run_is_logged_and_measured():
    @telemetry.scheduled("Janitor")
    def handler(event: dict, context: object) -> dict:
        return {"purged": 2}

    with captured() as lines:
        assert handler({"task": "purge_deleted_topics"}, CONTEXT) == {"purged": 2}
    [run] = [x for x in lines if x.get("message") == "run"]
    assert (run["task"], run["request_kind"], run["result"]) == (
        "purge_deleted_topics",
        "Janitor",
        {"purged": 2},
    )
    [document] = metric_documents(lines)
    assert (document["Runs"], document["RunErrors"]) == ([1.0], [0.0])


def test_a_failed_scheduled_run_is_logged_with_its_error_and_counted():
    @telemetry.scheduled("Scheduler")
    def handler(event: dict, context: object) -> dict:
        raise ValueError("boom")

    with captured() as lines, pytest.raises(ValueError):
        handler({}, CONTEXT)
    [failed] = [x for x in lines if x.get("message") == "run failed"]
    assert failed["level"] == "ERROR" and "boom" in failed["exception"]
    [document] = metric_documents(lines)
    assert document["RunErrors"] == [1.0]


def test_every_template_route_is_named_by_its_event_name():
    """The request kinds are the HttpApi event names of template.yaml, one for each."""
    template = load_template(TEMPLATE)
    routes = {
        route.route_key: route.event_name
        for function in template.functions.values()
        for route in function.http_routes
    }
    assert routes == REQUEST_KINDS


@pytest.mark.parametrize(
    ("environ", "enabled"),
    [
        ({"LAMBDA_TASK_ROOT": "/var/task"}, True),
        ({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"}, False),
        ({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"}, False),
        ({}, False),  # the local stack, the tests
        ({"POWERTOOLS_TRACE_DISABLED": "false"}, False),
    ],
)
def test_tracing_is_on_in_lambda_only_unless_disabled(environ, enabled):
    assert telemetry.tracing_enabled(environ) is enabled


def test_without_tracing_a_handler_is_left_as_it_is():

    def handler(event: dict, context: object) -> dict:
        return {}

    assert telemetry.tracer is None  # no LAMBDA_TASK_ROOT here
    assert telemetry.traced(handler) is handler
    telemetry.annotate(request_kind="Health")  # does nothing


def test_logging_and_metrics_make_no_aws_call():
    from cirrusmq_broker.storage.clients import observe_calls

    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(operation))
    try:
        with captured() as lines:
            health_app().resolve(health(), CONTEXT)
    finally:
        remove()
    assert metric_documents(lines) and request_line(lines)
    assert seen == []  # EMF is a log line: CloudWatch extracts the metrics from the logs


def test_the_body_sizes_are_counted_in_utf8_bytes():
    def send() -> dict:
        return {"statusCode": 200, "headers": {}, "body": '{"tag":"' + "é" * 100 + '"}'}

    body = '{"tag": "' + "\U0001f600" * 10 + '"}'
    sent = event("POST", "/v1/topics/t/messages", "/v1/topics/{topic}/messages", body=body)
    with captured() as lines:
        observe(sent, CONTEXT, send, lambda: "AKIDEXAMPLE")
    [document] = metric_documents(lines)
    assert document["RequestBytes"] == [len(body.encode())]
    assert document["ResponseBytes"] == [210]


@pytest.fixture
def fresh_heap() -> Iterator[None]:
    """The process as if no request had settled it yet; unfrozen again afterwards."""
    heap._freeze_once.cache_clear()
    yield
    gc.unfreeze()
    heap._freeze_once.cache_clear()


def test_on_lambda_the_first_request_freezes_what_the_process_holds_once(
    monkeypatch: pytest.MonkeyPatch, fresh_heap: None
) -> None:
    monkeypatch.setenv("AWS_EXECUTION_ENV", "AWS_Lambda_python3.11")
    app = health_app()
    held = [[n] for n in range(1000)]  # alive before the first request: frozen with it
    assert app.resolve(health(), CONTEXT)["statusCode"] == 200
    frozen = gc.get_freeze_count()
    assert frozen >= len(held)
    later = [[n] for n in range(1000)]  # made after it: left to the collector
    assert app.resolve(health(), CONTEXT)["statusCode"] == 200
    # none of them frozen (frozen objects freed by reference counting leave the count)
    assert gc.get_freeze_count() <= frozen, len(later)


def test_outside_lambda_nothing_is_frozen(
    monkeypatch: pytest.MonkeyPatch, fresh_heap: None
) -> None:
    monkeypatch.delenv("AWS_EXECUTION_ENV", raising=False)
    before = gc.get_freeze_count()
    assert health_app().resolve(health(), CONTEXT)["statusCode"] == 200
    assert gc.get_freeze_count() == before


class _Node:
    """A reference cycle's member (weakly referable)."""

    link: object = None


def test_the_first_requests_own_cyclic_garbage_is_freed_not_frozen(
    monkeypatch: pytest.MonkeyPatch, fresh_heap: None
) -> None:
    monkeypatch.setenv("AWS_EXECUTION_ENV", "AWS_Lambda_python3.11")
    left: list[weakref.ref] = []

    def make_a_cycle() -> None:
        node = _Node()
        node.link = node  # garbage once the route returns; only the collector frees it
        left.append(weakref.ref(node))

    assert health_app(make_a_cycle).resolve(health(), CONTEXT)["statusCode"] == 200
    assert left[0]() is None


def test_each_request_kind_freezes_after_its_own_first_request(
    monkeypatch: pytest.MonkeyPatch, fresh_heap: None
) -> None:
    monkeypatch.setenv("AWS_EXECUTION_ENV", "AWS_Lambda_python3.11")
    router = APIGatewayHttpRouter()
    router.get("/v1/health")(lambda: {"status": "ok"})
    router.get("/v1/topics")(lambda: {"topics": []})
    app = create_app(router)
    assert app.resolve(health(), CONTEXT)["statusCode"] == 200
    after_health = gc.get_freeze_count()
    made_since = [[n] for n in range(1000)]  # what the next kind's first use leaves behind
    topics = event("GET", "/v1/topics", "/v1/topics")
    answer = app.resolve(topics, CONTEXT)
    assert gc.get_freeze_count() >= after_health + len(made_since), answer
