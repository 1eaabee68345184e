"""Exactly-once consume -> produce with a PushConsumer, through the local stack.

The push consumer given ``exactly_once=producer`` hands its listener an open step acking the
message (or the batch); a success commits that step instead of acking, a failure or a
refused commit drops it and the message comes back.
"""

from __future__ import annotations

import threading

from cirrusmq import AckStatus, ConsumeResult, ExactlyOnceProducer, Message, PushConsumer, SimpleConsumer

from ..helpers import wait_until
from .test_exactly_once import stage  # noqa: F401  (fixture)
from .test_transactions import drain


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
    endpoint, credentials, admin, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    recorder = StepRecorder()
    taken_over = []

    with SimpleConsumer(endpoint, credentials, group, [source], await_duration=0) as successor:

        def slow(message, step):
            recorder.keep(step)
            step.send(Message(sink, b"from a zombie"))
            cirrusmq_stack.advance_time(61)  # the lease expires meanwhile
            taken_over.extend(successor.receive(3, 300))  # and the messages move on
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

        assert drain(endpoint, credentials, sink) == []
        assert sorted(m.body for m in taken_over) == [b"order-0", b"order-1", b"order-2"]
        assert admin.describe_group(group, source).inflight == 3  # the step acked none
        results = successor.ack_batch(taken_over)
        assert {r.status for r in results} == {AckStatus.ACKED}
