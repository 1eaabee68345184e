"""Fixtures for the SDK tests against a local stack (tests/sdk/unit needs nothing running).

They talk to one local stack for the whole session (the ``cirrusmq_stack`` fixture of the
SDK's pytest plugin) through real HTTP; each test makes its own topics and groups, so tests do
not see each other's messages.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import httpx
import pytest
from cirrusmq import Admin, Credentials

from .proxy import TcpProxy


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class RequestCounter:
    """An httpx request hook counting requests by ``METHOD path``."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, request: httpx.Request) -> None:
        self.counts[f"{request.method} {request.url.path}"] += 1

    def sends(self, topic: str) -> int:
        return self.counts[f"POST /v1/topics/{topic}/messages"]

    @property
    def hooks(self) -> dict[str, list[Callable]]:
        return {"request": [self]}


@pytest.fixture(scope="session")
def endpoint(cirrusmq_stack) -> str:
    return cirrusmq_stack.endpoint


@pytest.fixture(scope="session")
def credentials(cirrusmq_stack) -> Credentials:
    return cirrusmq_stack.credentials


@pytest.fixture(scope="session")
def admin(endpoint: str, credentials: Credentials) -> Iterator[Admin]:
    # a function's first call on the session's stack imports its handlers: seconds under load
    with Admin(endpoint, credentials, request_timeout_s=60) as admin:
        yield admin


@pytest.fixture
def make_topic(admin: Admin) -> Callable[..., str]:
    def make(prefix: str = "t", **options) -> str:
        name = unique(prefix)
        admin.create_topic(name, **options)
        return name

    return make


@pytest.fixture
def topic(make_topic: Callable[..., str]) -> str:
    return make_topic()


@pytest.fixture
def group() -> str:
    return unique("g")


@pytest.fixture
def proxy(endpoint: str) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the stack's gateway that can go down or drop responses."""
    with TcpProxy(httpx.URL(endpoint).host, httpx.URL(endpoint).port) as proxy:
        yield proxy
