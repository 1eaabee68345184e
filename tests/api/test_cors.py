"""CORS is off unless CIRRUSMQ_CORS_ALLOW_ORIGINS (template: CorsAllowOrigins) lists origins."""

from __future__ import annotations

import pytest
from cirrusmq_api.app import create_app
from cirrusmq_api.routes import meta


def health_event(origin: str) -> dict:
    return {
        "version": "2.0",
        "routeKey": "GET /v1/health",
        "rawPath": "/v1/health",
        "rawQueryString": "",
        "headers": {"origin": origin},
        "requestContext": {"http": {"method": "GET", "path": "/v1/health"}, "stage": "$default"},
        "isBase64Encoded": False,
    }


def allowed_origin(event: dict) -> str | None:
    headers = create_app(meta.router).resolve(event, None).get("headers") or {}
    return {k.lower(): v for k, v in headers.items()}.get("access-control-allow-origin")


def test_no_cors_headers_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CIRRUSMQ_CORS_ALLOW_ORIGINS", raising=False)
    assert allowed_origin(health_event("https://evil.example")) is None


def test_configured_origins_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CIRRUSMQ_CORS_ALLOW_ORIGINS", "https://a.example, https://b.example")
    assert allowed_origin(health_event("https://b.example")) == "https://b.example"
    assert allowed_origin(health_event("https://evil.example")) is None
