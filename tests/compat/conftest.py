"""Fixtures for the compatibility tests: the real, unmodified clients of other protocols
against the local stack over real HTTP (one stack per session, each test its own topics)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from cirrusmq import Admin, Credentials

from .mqhttp_helpers import mq_client


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


@pytest.fixture
def client(cirrusmq_stack):
    """An unmodified mq-http-sdk client on the stack (its connection closed after)."""
    client = mq_client(cirrusmq_stack)
    try:
        yield client
    finally:
        client.close_connection()
