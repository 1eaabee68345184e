"""Fixtures for the compatibility tests: the real, unmodified clients of other protocols
against the local stack over real HTTP (one stack per session, each test its own topics)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from cirrusmq import Admin, Credentials


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def admin(cirrusmq_stack) -> Iterator[Admin]:
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        yield admin


@pytest.fixture
def make_topic(admin: Admin) -> Callable[..., str]:
    def make(prefix: str = "mq", **options) -> str:
        name = unique(prefix)
        admin.create_topic(name, **options)
        return name

    return make


@pytest.fixture(scope="session")
def credentials(cirrusmq_stack) -> Credentials:
    return cirrusmq_stack.credentials
