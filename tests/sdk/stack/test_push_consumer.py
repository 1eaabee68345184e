"""PushConsumer against the local stack."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from cirrusmq import ConsumeResult, Message, MessageView, Producer, PushConsumer, SimpleConsumer

from ..helpers import wait_until


def fill(endpoint, credentials, topic, count, **fields):
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(topic, f"m{i}", **fields) for i in range(count)])


class Recorder:
    """A listener that records what it saw; ``behaviour(message)`` decides the result."""

    def __init__(self, behaviour=lambda m: ConsumeResult.SUCCESS, delay_s: float = 0.0):
        self.behaviour = behaviour
        self.delay_s = delay_s
        self.seen: list[MessageView] = []
        self.succeeded: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, message: MessageView) -> ConsumeResult:
        with self.lock:
            self.seen.append(message)
        if self.delay_s:
            time.sleep(self.delay_s)
        result = self.behaviour(message)
        if result is ConsumeResult.SUCCESS:
            with self.lock:
                self.succeeded[message.text] += 1
        return result


def test_every_message_is_consumed_and_acked(endpoint, credentials, admin, topic, group):
    fill(endpoint, credentials, topic, 300, tag="T")
    listener = Recorder()
    with PushConsumer(
        endpoint, credentials, group, {topic: "T"}, listener, consume_threads=4
    ) as consumer:
        wait_until(lambda: len(listener.succeeded) == 300)
        assert consumer.cached_messages <= consumer.max_cached_messages
    assert set(listener.succeeded.values()) == {1}
    described = admin.describe_group(group, topic)
    assert (described.lag, described.inflight) == (0, 0)


def test_flow_control_bounds_the_messages_in_memory(endpoint, credentials, topic, group):
    fill(endpoint, credentials, topic, 120)
    listener = Recorder(delay_s=0.01)
    consumer = PushConsumer(
        endpoint,
        credentials,
        group,
        [topic],
        listener,
        consume_threads=2,
        max_cached_messages=10,
    ).start()
    wait_until(lambda: len(listener.succeeded) == 120)
    consumer.shutdown()
    assert consumer.max_cached_seen <= 10


def test_graceful_shutdown_loses_nothing(endpoint, credentials, admin, topic, group):
    fill(endpoint, credentials, topic, 400)
    first = Recorder(delay_s=0.005)
    consumer = PushConsumer(
        endpoint,
        credentials,
        group,
        [topic],
        first,
        consume_threads=4,
        max_cached_messages=64,
    ).start()
    wait_until(lambda: len(first.succeeded) >= 100)
    consumer.shutdown(timeout_s=30)
    consumer.shutdown()  # idempotent
    processed = set(first.succeeded)
    assert 100 <= len(processed) < 400
    # Every success was acked: a second consumer of the group gets exactly the others, at once.
    rest = []
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=1) as c:
        while batch := c.receive(500, 60):
            rest += batch
            c.ack_batch(batch)
    assert {m.text for m in rest} == {f"m{i}" for i in range(400)} - processed
    assert len(rest) == 400 - len(processed)
    assert admin.describe_group(group, topic).inflight == 0


@pytest.mark.slow
def test_failed_messages_are_redelivered_with_their_attempt_count(
    endpoint, credentials, admin, topic, group
):
    fill(endpoint, credentials, topic, 6)

    def behaviour(message: MessageView) -> ConsumeResult:
        if message.delivery_attempt > 1:
            return ConsumeResult.SUCCESS
        if message.text in ("m0", "m1"):
            return ConsumeResult.FAILURE
        if message.text == "m2":
            raise RuntimeError("an exception counts as a failure")
        return ConsumeResult.SUCCESS

    listener = Recorder(behaviour)
    with PushConsumer(endpoint, credentials, group, [topic], listener):
        wait_until(lambda: len(listener.succeeded) == 6, timeout_s=30)
    attempts = {(m.text, m.delivery_attempt) for m in listener.seen}
    assert {("m0", 2), ("m1", 2), ("m2", 2)} <= attempts
    assert not any(text in ("m3", "m4", "m5") and n > 1 for text, n in attempts)
    assert set(listener.succeeded.values()) == {1}
    assert admin.describe_group(group, topic).inflight == 0


def test_acks_that_cannot_reach_the_service_are_retried(
    endpoint, credentials, admin, topic, group, proxy
):
    fill(endpoint, credentials, topic, 20)
    # the acks go on their own or ride on a receive: the first two requests carrying any
    proxy.reject_requests(
        2, f"POST /v1/groups/{group}/".encode(), containing=(b"/ack HTTP", b'"ack":')
    )
    listener = Recorder()
    with PushConsumer(proxy.url, credentials, group, [topic], listener, max_attempts=1):
        wait_until(lambda: len(listener.succeeded) == 20)
        wait_until(lambda: admin.describe_group(group, topic).inflight == 0, timeout_s=15)
    rejected = [e for e in proxy.exchanges if e.dropped]
    assert len(rejected) == 2
    assert set(listener.succeeded.values()) == {1}  # acked in time: nothing came back
