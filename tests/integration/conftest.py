"""Integration fixtures: the local stack (moto server + gateway + handlers), real HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest


@pytest.fixture
def api(cirrusmq_stack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=cirrusmq_stack.endpoint, timeout=60) as client:
        yield client


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
