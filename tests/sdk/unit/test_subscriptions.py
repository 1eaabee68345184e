"""Subscriptions: the typed conflict error, Admin.subscribe and `cirrusmq group subscribe`."""

from __future__ import annotations

import json

import cirrusmq.cli.connection as commands
import httpx
import pytest
from cirrusmq import (
    Admin,
    ConflictError,
    FilterExpression,
    SimpleConsumer,
    Subscription,
    SubscriptionConflictError,
)
from cirrusmq.cli import app
from cirrusmq.errors import error_from_response
from cirrusmq.transport import Transport
from typer.testing import CliRunner

from .fake_group import FakeGroupService

CONFLICT = {
    "code": "SubscriptionConflict",
    "message": "group g is subscribed to orders with another filter",
    "details": {"topic": "orders", "subscribed": "TagA", "requested": "TagB"},
}


def test_a_subscription_conflict_is_typed():
    error = error_from_response(409, CONFLICT)
    assert isinstance(error, SubscriptionConflictError) and isinstance(error, ConflictError)
    assert (error.code, error.http_status, error.retriable) == ("SubscriptionConflict", 409, False)
    assert (error.topic, error.subscribed, error.requested) == ("orders", "TagA", "TagB")


def test_a_receive_with_another_filter_raises_it():
    service = FakeGroupService()
    service.subscriptions["t"] = "TagA"
    transport = Transport("http://fake", service.credentials, http_transport=service.transport())
    consumer = SimpleConsumer("http://fake", None, "g", {"t": "TagB"}, 0, transport=transport)
    with consumer, pytest.raises(SubscriptionConflictError) as conflict:
        consumer.receive()
    assert conflict.value.requested == "TagB"
    assert service.receives == 1  # not retried


class SubscriptionService:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        _, _, _, group, _, topic = request.url.path.split("/")
        body = json.loads(request.content)
        return httpx.Response(200, json={"group": group, "topic": topic, **body})


def admin(service: SubscriptionService) -> Admin:
    return Admin(
        "http://fake",
        transport=Transport("http://fake", http_transport=httpx.MockTransport(service)),
    )


def test_admin_subscribe_puts_the_filter():
    service = SubscriptionService()
    with admin(service) as a:
        assert a.subscribe("billing", "orders", "TagA||TagB") == Subscription(
            "billing", "orders", "TagA||TagB"
        )
        assert a.subscribe("billing", "orders", FilterExpression.ALL).filter == "*"
        with pytest.raises(ValueError):
            a.subscribe("billing", "orders", "not a | filter")
    first = service.requests[0]
    assert (first.method, first.url.path) == ("PUT", "/v1/groups/billing/subscriptions/orders")
    assert json.loads(first.content) == {"filter": "TagA||TagB"}
    assert len(service.requests) == 2


def test_the_cli_sets_a_subscription(monkeypatch, tmp_path):
    service = SubscriptionService()
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://fake")
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    monkeypatch.setattr(commands, "Admin", lambda endpoint, credentials: admin(service))
    result = CliRunner().invoke(
        app, ["group", "subscribe", "billing", "--topic", "orders", "--filter", "A || B"]
    )
    assert result.exit_code == 0, result.output
    assert "group billing now consumes orders with filter A || B" in result.stdout
    assert json.loads(service.requests[0].content) == {"filter": "A || B"}
    bad = CliRunner().invoke(app, ["group", "subscribe", "g", "--topic", "t", "--filter", "a|"])
    assert bad.exit_code == 2 and service.requests[1:] == []


def test_an_sql92_filter_is_put_with_its_type():
    service = SubscriptionService()
    with admin(service) as a:
        subscription = a.subscribe("billing", "orders", FilterExpression.sql("a > 5"))
    assert json.loads(service.requests[0].content) == {"filter": "a > 5", "filter_type": "SQL92"}
    assert subscription.filter_type == "SQL92"
    assert subscription.filter_expression == FilterExpression.sql("a > 5")


def test_the_cli_sets_an_sql92_subscription(monkeypatch, tmp_path):
    service = SubscriptionService()
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://fake")
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    monkeypatch.setattr(commands, "Admin", lambda endpoint, credentials: admin(service))
    result = CliRunner().invoke(
        app, ["group", "subscribe", "billing", "--topic", "orders", "--sql", "region = 'eu'"]
    )
    assert result.exit_code == 0, result.output
    assert "group billing now consumes orders with filter SQL92 region = 'eu'" in result.stdout
    assert json.loads(service.requests[0].content) == {
        "filter": "region = 'eu'",
        "filter_type": "SQL92",
    }
    both = ["group", "subscribe", "g", "--topic", "t", "--filter", "A", "--sql", "a > 1"]
    assert CliRunner().invoke(app, both).exit_code == 2
    assert (
        CliRunner().invoke(app, ["group", "subscribe", "g", "--topic", "t", "--sql", " "]).exit_code
        == 2
    )
    assert len(service.requests) == 1


def test_filter_expression_types():
    sql = FilterExpression.sql("  a > 5 ")
    assert (sql.expression, sql.filter_type, str(sql)) == ("a > 5", "SQL92", "SQL92 a > 5")
    assert sql.wire == {"filter": "a > 5", "filter_type": "SQL92"}
    assert FilterExpression("A || B").wire == {"filter": "A || B"}
    with pytest.raises(ValueError):
        FilterExpression("a > 5", "SQL")
    with pytest.raises(ValueError):
        FilterExpression.sql("")
