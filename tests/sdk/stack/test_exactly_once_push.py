"""Exactly-once consume -> produce with a PushConsumer, through the local stack.

The push consumer given ``exactly_once=producer`` hands its listener an open step acking the
message (or the batch); a success commits that step instead of acking, a failure or a
refused commit drops it and the message comes back.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from cirrusmq import (
    AckStatus,
    ConsumeResult,
    ExactlyOnceProducer,
    LeaseMovedOnError,
    Message,
    MQError,
    Producer,
    ProducerFencedError,
    PushConsumer,
    SimpleConsumer,
)

from ..helpers import wait_until
from .conftest import unique
from .test_transactions import drain


@pytest.fixture
def stage(endpoint, credentials, make_topic):
    """An input topic with three orders, an output topic, a group and a producer group."""
    source, sink = make_topic("orders", queues=1), make_topic("enriched", queues=2)
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(source, f"order-{n}".encode()) for n in range(3)])
    return source, sink, unique("g"), unique("pg")


class StepRecorder:
    """Records the steps a listener got, to wait on their outcome (COMMITTED/ABORTED)."""

    def __init__(self) -> None:
        self.steps = []
        self.lock = threading.Lock()

    def keep(self, step) -> None:
        with self.lock:
            self.steps.append(step)

    def states(self) -> list[str]:
        with self.lock:
            return [s.state for s in self.steps]


def push(endpoint, credentials, group, source, listener, producer, **options) -> PushConsumer:
    return PushConsumer(
        endpoint,
        credentials,
        group,
        [source],
        listener,
        exactly_once=producer,
        max_poll_interval_s=0.2,
        notifications=False,
        heartbeat_interval_s=None,
        **options,
    )


def fenced_producer(endpoint, credentials, producer_group) -> ExactlyOnceProducer:
    """An instance of transactional id ``stage`` that a newer one has fenced."""
    old = ExactlyOnceProducer(
        endpoint, credentials, producer_group=producer_group, transactional_id="stage"
    )
    ExactlyOnceProducer(
        endpoint, credentials, producer_group=producer_group, transactional_id="stage"
    ).close()  # a newer instance registered: the old one is fenced
    return old


def assert_stops_fenced(endpoint, credentials, group, source, listener, producer) -> None:
    """A push consumer stepping with the fenced ``producer`` stops with ProducerFencedError
    (then the producer is closed)."""
    with (
        producer,
        push(
            endpoint,
            credentials,
            group,
            source,
            listener,
            producer,
            receive_batch_size=1,
            max_cached_messages=1,
        ) as zombie,
    ):
        wait_until(lambda: zombie.fetch_error is not None)
        assert isinstance(zombie.fetch_error, ProducerFencedError)


def test_per_message_each_step_sends_its_output_once_and_acks_its_input(
    endpoint, credentials, admin, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    recorder = StepRecorder()

    def enrich(message, step):
        recorder.keep(step)
        step.send(Message(sink, message.body + b"+enriched"))
        return ConsumeResult.SUCCESS

    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        push(endpoint, credentials, group, source, enrich, producer),
    ):
        wait_until(lambda: recorder.states() == ["COMMITTED"] * 3)

    assert [s.result.acked for s in recorder.steps] == [1, 1, 1]
    cirrusmq_stack.advance_time(61)
    with SimpleConsumer(endpoint, credentials, group, [source], await_duration=0) as again:
        assert again.receive(10, 30) == []  # acked by the steps
    assert drain(endpoint, credentials, sink) == [
        b"order-0+enriched",
        b"order-1+enriched",
        b"order-2+enriched",
    ]
    assert admin.describe_group(group, source).inflight == 0


def test_per_batch_one_step_sends_the_batch_outputs_once_and_acks_the_batch(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    recorder = StepRecorder()
    sizes = []

    def enrich_all(messages, step):
        recorder.keep(step)
        sizes.append(len(messages))
        for message in messages:
            step.send(Message(sink, message.body + b"+enriched"))
        return ConsumeResult.SUCCESS

    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        push(
            endpoint, credentials, group, source, enrich_all, producer, step_per_batch=True
        ) as consumer,
    ):
        wait_until(lambda: sum(sizes) == 3 and set(recorder.states()) == {"COMMITTED"})
        assert consumer.cached_messages == 0

    assert sum(s.result.acked for s in recorder.steps) == 3
    cirrusmq_stack.advance_time(61)
    with SimpleConsumer(endpoint, credentials, group, [source], await_duration=0) as again:
        assert again.receive(10, 30) == []
    assert drain(endpoint, credentials, sink) == [
        b"order-0+enriched",
        b"order-1+enriched",
        b"order-2+enriched",
    ]


def test_a_failing_listener_sends_nothing_and_the_message_comes_back(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    attempts: list[tuple[bytes, int]] = []
    recorder = StepRecorder()

    def flaky(message, step):
        recorder.keep(step)
        attempts.append((message.body, message.delivery_attempt))
        step.send(Message(sink, message.body + b"+enriched"))
        if message.body == b"order-0" and message.delivery_attempt == 1:
            raise RuntimeError("enrichment failed")
        return ConsumeResult.SUCCESS

    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        push(endpoint, credentials, group, source, flaky, producer),
    ):
        wait_until(lambda: sorted(recorder.states()) == ["ABORTED", "COMMITTED", "COMMITTED"])
        assert b"order-0+enriched" not in drain(endpoint, credentials, sink)

        def redelivered() -> bool:
            cirrusmq_stack.advance_time(11)  # past the first retry level
            return (b"order-0", 2) in attempts

        wait_until(redelivered, step_s=0.5)
        wait_until(lambda: recorder.states().count("COMMITTED") == 3)

    assert drain(endpoint, credentials, sink) == [
        b"order-0+enriched",
        b"order-1+enriched",
        b"order-2+enriched",
    ]


def test_a_commit_refused_because_the_lease_moved_on_sends_and_acks_nothing(
    endpoint, credentials, stage, cirrusmq_stack, caplog
):
    source, sink, group, producer_group = stage
    recorder = StepRecorder()

    with SimpleConsumer(endpoint, credentials, group, [source], await_duration=0) as successor:

        def slow(messages, step):
            recorder.keep(step)
            step.send(Message(sink, b"from a zombie"))
            cirrusmq_stack.advance_time(61)  # the lease expires meanwhile
            successor.receive(3, 300)  # and the messages move on
            return ConsumeResult.SUCCESS

        with (
            ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
            push(
                endpoint,
                credentials,
                group,
                source,
                slow,
                producer,
                step_per_batch=True,
                receive_batch_size=3,
                max_cached_messages=3,
            ),
        ):
            wait_until(lambda: recorder.states() == ["ABORTED"])

        refusals = [a for r in caplog.records for a in r.args or () if isinstance(a, MQError)]
        assert [type(e) for e in refusals] == [LeaseMovedOnError]
        assert drain(endpoint, credentials, sink) == []
        back: list = []

        def came_back() -> bool:  # the step acked none of them
            cirrusmq_stack.advance_time(11)
            back.extend(successor.receive(10, 300))
            return len(back) >= 3

        wait_until(came_back, step_s=0.5)
        assert sorted(m.body for m in back) == [b"order-0", b"order-1", b"order-2"]
        assert {r.status for r in successor.ack_batch(back)} == {AckStatus.ACKED}


@pytest.mark.parametrize("per_batch", [False, True], ids=["per-message", "per-batch"])
def test_orderly_steps_commit_each_output_once_in_order_after_a_failure(
    endpoint, credentials, make_topic, per_batch
):
    source, sink = make_topic("fifo", queues=1, message_type="FIFO"), make_topic("out")
    group, producer_group = unique("g"), unique("pg")
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(source, f"k:{n}", message_group="k") for n in range(4)])
    seen: list[tuple[str, int]] = []
    recorder = StepRecorder()

    def enrich(message, step):
        seen.append((message.text, message.delivery_attempt))
        step.send(Message(sink, message.text + "+enriched"))
        if message.text == "k:1" and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS

    def enrich_all(messages, step):
        recorder.keep(step)
        results = [enrich(m, step) for m in messages]
        return ConsumeResult.FAILURE if ConsumeResult.FAILURE in results else ConsumeResult.SUCCESS

    def enrich_one(message, step):
        recorder.keep(step)
        return enrich(message, step)

    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        push(
            endpoint,
            credentials,
            group,
            source,
            enrich_all if per_batch else enrich_one,
            producer,
            orderly=True,
            suspend_s=0,
            step_per_batch=per_batch,
        ),
    ):
        wait_until(lambda: recorder.states().count("COMMITTED") == (1 if per_batch else 4))

    in_order = [f"k:{n}" for n in range(4)]
    again = in_order if per_batch else ["k:1", "k:2", "k:3"]  # from the failed step on
    assert [text for text, _ in seen] == (in_order[:2] if not per_batch else in_order) + again
    assert drain(endpoint, credentials, sink) == [f"k:{n}+enriched".encode() for n in range(4)]


def test_a_fenced_producer_stops_the_push_consumer_and_sends_nothing(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    calls = []

    def enrich(message, step):
        calls.append(message.body)
        step.send(Message(sink, message.body + b"+enriched"))
        return ConsumeResult.SUCCESS

    old = fenced_producer(endpoint, credentials, producer_group)
    assert_stops_fenced(endpoint, credentials, group, source, enrich, old)

    assert len(calls) == 1  # it took no message after its step was refused
    assert drain(endpoint, credentials, sink) == []


def test_a_producer_fenced_before_the_consumer_started_stops_it_too(
    endpoint, credentials, stage, cirrusmq_stack
):
    """A producer another consumer (or the application) already saw fenced: this consumer
    takes no message either, instead of failing each one (burning its attempts) forever."""
    source, sink, group, producer_group = stage
    calls = []

    def enrich(message, step):
        calls.append(message.body)
        step.send(Message(sink, message.body + b"+enriched"))
        return ConsumeResult.SUCCESS

    old = fenced_producer(endpoint, credentials, producer_group)
    step = old.exactly_once(SimpleNamespace(group=group))
    step.send(Message(sink, b"from a zombie"))
    with pytest.raises(ProducerFencedError):
        step.commit()
    assert old.fenced
    assert_stops_fenced(endpoint, credentials, group, source, enrich, old)

    assert calls == []
    assert drain(endpoint, credentials, sink) == []


def test_a_step_that_cannot_open_sends_the_message_back_at_once(
    endpoint, credentials, stage, cirrusmq_stack
):
    """A closed producer opens no step: the message is failed (back after the first retry
    level), not left leased until its invisible duration ends."""
    source, sink, group, producer_group = stage
    calls = []

    def enrich(message, step):
        calls.append(message.body)
        return ConsumeResult.SUCCESS

    producer = ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group)
    producer.close()
    with push(
        endpoint,
        credentials,
        group,
        source,
        enrich,
        producer,
        receive_batch_size=3,
        max_cached_messages=3,
        invisible_duration_s=3600,
    ) as consumer:
        wait_until(lambda: consumer.cached_messages == 0 and consumer.max_cached_seen == 3)
    assert calls == []
    cirrusmq_stack.advance_time(11)  # past the first retry level, far from the lease's end
    with SimpleConsumer(endpoint, credentials, group, [source], await_duration=0) as successor:
        back = successor.receive(10, 300)
        assert sorted(m.body for m in back) == [b"order-0", b"order-1", b"order-2"]
