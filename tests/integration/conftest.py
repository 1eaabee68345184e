"""Integration fixtures: the local stack (moto server + gateway + handlers), real HTTP; the
``api`` client signs every request with the stack's bootstrap admin key."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import signed_client


@pytest.fixture
def api(cirrusmq_stack) -> Iterator[httpx.Client]:
    with signed_client(cirrusmq_stack) as client:
        yield client


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
