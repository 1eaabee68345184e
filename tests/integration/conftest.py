"""Integration fixtures: the local stack (moto server + gateway + handlers), real HTTP; the
``api`` client signs every request with the stack's bootstrap admin key."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from api_helpers import StoredState, signed_client


def pytest_assertrepr_compare(op: str, left: object, right: object) -> list[str] | None:
    """What differs between two stored states: per table, the items gone and the new ones."""
    if op != "==" or not (isinstance(left, StoredState) and isinstance(right, StoredState)):
        return None
    lines = [f"{left!r} == {right!r}"]
    for table, (gone, new) in left.differences(right).items():
        lines += [f"{table}:", *(f"  - {line}" for line in gone), *(f"  + {line}" for line in new)]
    return lines


@pytest.fixture
def api(cirrusmq_stack) -> Iterator[httpx.Client]:
    with signed_client(cirrusmq_stack) as client:
        yield client


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
