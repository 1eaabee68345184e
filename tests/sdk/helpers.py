"""Helpers of the SDK tests: draining a topic from a local stack, waiting for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable

from cirrusmq import Credentials, MessageView, SimpleConsumer


def drain(
    endpoint: str,
    credentials: Credentials,
    group: str,
    topic: str,
    *,
    expected: int,
    timeout_s: float = 30.0,
    ack: bool = True,
) -> list[MessageView]:
    """Receive (and ack) from ``topic`` as ``group`` until ``expected`` messages came, then
    check for a short while that nothing more comes."""
    received: list[MessageView] = []
    deadline = time.monotonic() + timeout_s
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=1) as consumer:
        while len(received) < expected and time.monotonic() < deadline:
            batch = consumer.receive(500, 60)
            if batch and ack:
                consumer.ack_batch(batch)
            received += batch
        consumer.await_duration_s = 0.5
        extra = consumer.receive(100, 60)
    return received + extra


def wait_until(condition: Callable[[], object], timeout_s: float = 30.0, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(step_s)
    return value
