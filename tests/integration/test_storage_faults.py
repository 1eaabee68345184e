"""Throttled or failing AWS calls reach the caller as a retriable 429 / 503, never a 500
(a receive skips a queue whose group state stays contended: ``CONTENDED``).

Every (service, operation) a route calls is found by observing a clean call of the route;
then each AWS error is injected on that operation through a botocore ``before-call`` hook on
the very clients the handlers use (the local stack runs them in this process).
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from api_helpers import b64, make_topic, receive, send, signed_client
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError
from botocore.response import StreamingBody
from cirrusmq_broker.settings import Settings
from cirrusmq_broker.storage.clients import aws_client, observe_calls

# (AWS error code, HTTP status AWS answers with, expected HTTP status, expected code)
DYNAMODB_FAULTS = [
    ("ProvisionedThroughputExceededException", 400, 429, "Throttled"),
    ("ThrottlingException", 400, 429, "Throttled"),
    ("RequestLimitExceeded", 400, 429, "Throttled"),
    ("TransactionConflictException", 400, 503, "Busy"),
    ("TransactionInProgressException", 400, 503, "Busy"),
    ("InternalServerError", 500, 503, "Busy"),
    ("ServiceUnavailable", 503, 503, "Busy"),
]
S3_FAULTS = [
    ("SlowDown", 503, 429, "Throttled"),
    ("InternalError", 500, 503, "Busy"),
    ("ServiceUnavailable", 503, 503, "Busy"),
]
KMS_FAULTS = [
    ("ThrottlingException", 400, 429, "Throttled"),
    ("KMSInternalException", 500, 503, "Busy"),
]
FAULTS = {"dynamodb": DYNAMODB_FAULTS, "s3": S3_FAULTS, "kms": KMS_FAULTS}
CONTENDED = "TransactionConflictException"
"""A write refused because a transaction held its item: the stores read again and retry;
a receive whose queue stays contended serves the group's other queues (here none: an
empty answer, nothing leased), as it does for a transaction cancelled by conflicts."""

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}-{next(_names)}"


@dataclass
class Scene:
    """A topic with messages and a group holding leases on some of them."""

    topic: str
    message_id: str
    handles: list[str]


@pytest.fixture(scope="module")
def scene(cirrusmq_stack) -> Scene:
    topic = unique("faults")
    with signed_client(cirrusmq_stack) as api:
        make_topic(api, topic, queues=2)
        sent = send(api, topic, *[{"body": b64(b"x")} for _ in range(8)])
        got = receive(api, "holder", topic, max_messages=8, invisible_seconds=3600)
    return Scene(topic, sent["receipts"][0]["message_id"], [m["receipt_handle"] for m in got])


Request = Callable[[], httpx.Response]
Call = Callable[[httpx.Client, Scene], Request]
"""Prepares a request (before any fault is injected); returns the function making it."""


def _create(api: httpx.Client, _: Scene) -> Request:
    return lambda: api.post("/v1/topics", json={"name": unique("created")})


def _delete(api: httpx.Client, _: Scene) -> Request:
    name = unique("doomed")
    make_topic(api, name, queues=1)  # before any fault is injected
    return lambda: api.delete(f"/v1/topics/{name}")


def _invisible(api: httpx.Client, scene: Scene) -> Request:
    return lambda: _change_invisible(api, scene)


def _change_invisible(api: httpx.Client, scene: Scene) -> httpx.Response:
    response = api.post(
        "/v1/groups/holder/invisible",
        json={"receipt_handle": scene.handles[0], "invisible_seconds": 3600},
    )
    if response.status_code == 200:
        scene.handles[0] = response.json()["receipt_handle"]
    return response


def _ack(api: httpx.Client, scene: Scene) -> Request:
    return lambda: api.post("/v1/groups/holder/ack", json={"receipt_handles": scene.handles[1:3]})


ROUTES: dict[str, Call] = {
    "send": lambda api, s: (
        lambda: api.post(f"/v1/topics/{s.topic}/messages", json={"messages": [{"body": b64(b"y")}]})
    ),
    "send-idempotent": lambda api, s: (
        lambda: api.post(
            f"/v1/topics/{s.topic}/messages",
            json={"producer_id": unique("p"), "sequence": 0, "messages": [{"body": b64(b"y")}]},
        )
    ),
    "receive": lambda api, s: (
        lambda: api.post(
            f"/v1/groups/{unique('g')}/receive", json={"topic": s.topic, "max_messages": 2}
        )
    ),
    "ack": _ack,
    "invisible": _invisible,
    "lookup": lambda api, s: lambda: api.get(f"/v1/topics/{s.topic}/messages/{s.message_id}"),
    "describe-topic": lambda api, s: lambda: api.get(f"/v1/topics/{s.topic}"),
    "describe-group": lambda api, s: lambda: api.get(f"/v1/groups/holder?topic={s.topic}"),
    "create-topic": _create,
    "delete-topic": _delete,
    "list-topics": lambda api, s: lambda: api.get("/v1/topics"),
}


def handler_client(service: str) -> Any:
    """The boto3 client the handlers of this process use for ``service``."""
    return aws_client(service, Settings.from_env())


@contextmanager
def observed() -> Iterator[set[tuple[str, str]]]:
    calls: set[tuple[str, str]] = set()
    remove = observe_calls(lambda service, operation, _: calls.add((service, operation)))
    try:
        yield calls
    finally:
        remove()


BACKGROUND_THREADS = ("cirrusmq-", "notify", "delay-move", "delay-query", "asyncio")
"""Threads that are no request's: the local stack's stream poller and schedules
(``cirrusmq-*``), the notifier's and the delay release's pools, the WebSocket handlers."""


@contextmanager
def failing(service: str, operation: str, code: str, status: int) -> Iterator[list[int]]:
    """Every ``operation`` call of a request answers ``code`` / ``status`` (as AWS would,
    after retries). Background threads share the client and call as they go: theirs run
    untouched, so a fault that fired is one of the request's."""
    fired: list[int] = []

    def answer(**_: Any) -> tuple[AWSResponse, dict] | None:
        if threading.current_thread().name.startswith(BACKGROUND_THREADS):
            return None
        fired.append(1)
        parsed = {
            "Error": {"Code": code, "Message": "injected by the test"},
            "ResponseMetadata": {"HTTPStatusCode": status, "HTTPHeaders": {}},
        }
        return AWSResponse("https://aws.invalid/", status, {}, None), parsed

    events = handler_client(service).meta.events
    event = f"before-call.{service}.{operation}"
    events.register(event, answer, unique_id="cirrusmq-fault")
    try:
        yield fired
    finally:
        events.unregister(event, unique_id="cirrusmq-fault")


def assert_retriable(response: httpx.Response, status: int, code: str) -> None:
    assert (response.status_code, response.json().get("code")) == (status, code), response.text
    assert response.headers.get("retry-after") == "1", response.headers
    assert response.json()["message"]


@pytest.mark.parametrize("route", ROUTES.keys())
def test_aws_errors_on_every_call_of_a_route_are_retriable(api, scene, route):
    call = ROUTES[route]
    with observed() as calls:
        clean = call(api, scene)()
    assert clean.status_code < 300, clean.text
    assert calls, "the route made no AWS call"
    hit = set()
    for (service, operation), (code, aws_status, status, broker_code) in (
        (op, fault) for op in sorted(calls) for fault in FAULTS[op[0]]
    ):
        request = call(api, scene)
        with failing(service, operation, code, aws_status) as fired:
            response = request()
        assert response.status_code < 500 or response.status_code == 503, response.text
        if fired and code == CONTENDED and route == "receive" and response.status_code == 200:
            hit.add((service, operation))
            assert response.json()["messages"] == [], response.text  # the queue was skipped
        elif fired:
            hit.add((service, operation))
            assert_retriable(response, status, broker_code)
        else:  # a cache made the call unnecessary this time
            assert response.status_code < 300, response.text
    assert hit, f"no injected fault reached {route}"


def test_a_throttled_call_is_retried_by_the_sdk_then_reported(api, scene):
    """Through botocore's real retry path (before-send answers, as AWS would, thrice)."""
    answers: list[int] = []

    def throttled(request: Any, **_: Any) -> AWSResponse:
        answers.append(1)
        body = b'{"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException"}'
        return AWSResponse(request.url, 400, {"x-amzn-requestid": "x"}, _Raw(body))

    events = handler_client("dynamodb").meta.events
    events.register("before-send.dynamodb.Scan", throttled, unique_id="cirrusmq-throttle")
    try:
        response = api.get("/v1/topics")
    finally:
        events.unregister("before-send.dynamodb.Scan", unique_id="cirrusmq-throttle")
    assert_retriable(response, 429, "Throttled")
    assert len(answers) > 1  # botocore retried before the broker gave up


@pytest.mark.parametrize(
    ("service", "operation", "error"),
    [
        ("dynamodb", "Scan", EndpointConnectionError(endpoint_url="https://aws.invalid/")),
        ("dynamodb", "Scan", ReadTimeoutError(endpoint_url="https://aws.invalid/")),
    ],
    ids=["endpoint-connection", "read-timeout"],
)
def test_aws_out_of_reach_is_busy(api, service, operation, error):
    def fail(**_: Any) -> None:
        raise error

    events = handler_client(service).meta.events
    event = f"before-send.{service}.{operation}"
    events.register(event, fail, unique_id="cirrusmq-unreachable")
    try:
        response = api.get("/v1/topics")
    finally:
        events.unregister(event, unique_id="cirrusmq-unreachable")
    assert_retriable(response, 503, "Busy")


def test_errors_the_stores_handle_are_not_translated(api, scene):
    """ConditionalCheckFailed still means "exists": 409, not a retriable error."""
    response = api.post("/v1/topics", json={"name": scene.topic})
    assert (response.status_code, response.json()["code"]) == (409, "TopicAlreadyExists")
    assert "retry-after" not in response.headers


class _Raw:
    """The urllib3-like raw stream botocore reads a response body from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def test_a_body_cut_short_is_busy(api):
    """S3 answered 200, then the connection broke while the object was being read."""
    topic = unique("cut")
    make_topic(api, topic, queues=1)
    [receipt] = send(api, topic, {"body": b64(b"x")})["receipts"]
    fired: list[int] = []

    class Broken:
        def read(self, *_: Any, **__: Any) -> bytes:
            raise ReadTimeoutError(endpoint_url="https://aws.invalid/")

    def answer(**_: Any) -> tuple[AWSResponse, dict]:
        fired.append(1)
        parsed = {"Body": StreamingBody(Broken(), 10), "ResponseMetadata": {}}
        return AWSResponse("https://aws.invalid/", 200, {}, None), parsed

    events = handler_client("s3").meta.events
    events.register("before-call.s3.GetObject", answer, unique_id="cirrusmq-cut")
    try:
        response = api.get(f"/v1/topics/{topic}/messages/{receipt['message_id']}")
    finally:
        events.unregister("before-call.s3.GetObject", unique_id="cirrusmq-cut")
    assert fired, "the object was read from a cache"
    assert_retriable(response, 503, "Busy")
