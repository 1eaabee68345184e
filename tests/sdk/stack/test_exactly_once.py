"""Exactly-once consume -> produce through the local stack: real HTTP, the moto server.

A step acks what a stage read and sends what it produced in one commit. The broker's
handlers run in the stack's process, so a crash is a step of theirs raising a
BaseException (the Lambda dies there; the gateway answers 5xx) and the SDK retries.
"""

from __future__ import annotations

import asyncio
from contextlib import closing

import pytest
from cirrusmq import (
    AsyncExactlyOnceProducer,
    AsyncSimpleConsumer,
    ConflictError,
    ExactlyOnceProducer,
    LeaseMovedOnError,
    Message,
    Producer,
    ProducerFencedError,
    SimpleConsumer,
    StepTooLargeError,
)
from cirrusmq.transport import Transport
from cirrusmq_broker.storage.appends import BatchAppender

from .conftest import unique
from .test_transactions import drain, raw_topic_keys


class SimulatedCrash(BaseException):
    """The Lambda process dies at this point."""


@pytest.fixture
def stage(endpoint, credentials, make_topic):
    """An input topic with three orders, an output topic, a group and a producer group."""
    source, sink = make_topic("orders", queues=1), make_topic("enriched", queues=2)
    with Producer(endpoint, credentials) as producer:
        for n in range(3):
            producer.send(Message(source, f"order-{n}".encode()))
    return source, sink, unique("g"), unique("pg")


def consumer_of(endpoint, credentials, group, source) -> SimpleConsumer:
    return SimpleConsumer(endpoint, credentials, group, [source], await_duration=0)


def test_each_step_acks_its_order_and_sends_its_enriched_copy_once(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        consumer_of(endpoint, credentials, group, source) as consumer,
    ):
        for message in consumer.receive(10, 30):
            with producer.exactly_once(consumer) as step:
                step.send(Message(sink, message.body + b"+enriched"))
                step.ack(message)
            assert (step.result.acked, step.result.duplicate) == (1, False)
            assert step.result.receipts[0].offset is not None

    cirrusmq_stack.advance_time(31)
    with consumer_of(endpoint, credentials, group, source) as again:
        assert again.receive(10, 30) == []  # acked by the steps: nothing comes back
    assert drain(endpoint, credentials, sink) == [
        b"order-0+enriched",
        b"order-1+enriched",
        b"order-2+enriched",
    ]


def test_an_exception_in_the_step_aborts_it_and_nothing_is_sent_or_acked(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        consumer_of(endpoint, credentials, group, source) as consumer,
    ):
        [first, *_] = consumer.receive(3, 30)
        with pytest.raises(ValueError), producer.exactly_once(consumer) as step:
            step.send(Message(sink, b"half done"))
            step.ack(first)
            raise ValueError("enrichment failed")
        assert step.result is None

        assert drain(endpoint, credentials, sink) == []
        cirrusmq_stack.advance_time(31)  # the lease expires: its messages go to the retries
        consumer.receive(10, 30)
        cirrusmq_stack.advance_time(11)  # the first backoff level
        assert first.body in [m.body for m in consumer.receive(10, 30)]


@pytest.mark.parametrize("after_commit", [False, True], ids=["before-commit", "after-commit"])
def test_a_broker_crash_at_the_commit_leaves_neither_and_the_retry_commits_once(
    endpoint, credentials, stage, monkeypatch, after_commit
):
    source, sink, group, producer_group = stage
    commit = BatchAppender.append_streams
    crashes = []

    def dying(self, *args, **kwargs):
        if crashes:  # the retry goes through
            return commit(self, *args, **kwargs)
        crashes.append(1)
        if after_commit:
            commit(self, *args, **kwargs)
        raise SimulatedCrash()

    monkeypatch.setattr(BatchAppender, "append_streams", dying)
    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        consumer_of(endpoint, credentials, group, source) as consumer,
    ):
        [message] = consumer.receive(1, 30)
        with producer.exactly_once(consumer) as step:
            step.send(Message(sink, b"enriched"))
            step.ack(message)
    monkeypatch.undo()

    assert crashes and step.result.duplicate is after_commit
    assert drain(endpoint, credentials, sink) == [b"enriched"]


def test_a_zombie_whose_lease_moved_on_is_refused_and_sends_nothing(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        consumer_of(endpoint, credentials, group, source) as zombie,
        consumer_of(endpoint, credentials, group, source) as successor,
    ):
        stale = zombie.receive(3, 30)
        cirrusmq_stack.advance_time(31)
        successor.receive(3, 30)  # the leases expired: their messages moved on

        with pytest.raises(LeaseMovedOnError) as refused, producer.exactly_once(zombie) as step:
            step.send(Message(sink, b"from a zombie"))
            step.ack(stale[0])

    assert refused.value.http_status == 409
    assert drain(endpoint, credentials, sink) == []


def test_a_zombie_producer_fenced_by_a_newer_epoch_is_refused(
    endpoint, credentials, stage, cirrusmq_stack
):
    source, sink, group, producer_group = stage
    with (
        ExactlyOnceProducer(
            endpoint, credentials, producer_group=producer_group, transactional_id="enricher"
        ) as old,
        ExactlyOnceProducer(
            endpoint, credentials, producer_group=producer_group, transactional_id="enricher"
        ) as new,
        consumer_of(endpoint, credentials, group, source) as consumer,
    ):
        [message] = consumer.receive(1, 30)
        with pytest.raises(ProducerFencedError), old.exactly_once(consumer) as step:
            step.send(Message(sink, b"from the old instance"))
            step.ack(message)
        assert drain(endpoint, credentials, sink) == []

        with new.exactly_once(consumer) as step:  # the lease is still the consumer's
            step.send(Message(sink, b"from the new instance"))
            step.ack(message)
    assert drain(endpoint, credentials, sink) == [b"from the new instance"]


def test_a_retried_commit_answers_the_first_result_and_a_changed_one_is_refused(
    endpoint, credentials, stage
):
    source, sink, group, producer_group = stage
    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        consumer_of(endpoint, credentials, group, source) as consumer,
        closing(Transport(endpoint, credentials)) as raw,
    ):
        got = consumer.receive(3, 30)
        path = f"/v1/producer-groups/{producer_group}/steps"

        def body(handle: str, payload: str) -> dict:
            return {
                "transactional_id": producer.transactional_id,
                "epoch": producer.epoch,
                "sequence": 7,
                "group": group,
                "receipt_handles": [handle],
                "outputs": [{"topic": sink, "messages": [{"body": payload}]}],
            }

        first = raw.request("POST", path, json_body=body(got[0].receipt_handle, "QQ=="))
        again = raw.request("POST", path, json_body=body(got[0].receipt_handle, "QQ=="))
        with pytest.raises(ConflictError) as changed:
            raw.request("POST", path, json_body=body(got[1].receipt_handle, "Qg=="))

    assert again["duplicate"] and again["receipts"] == first["receipts"]
    assert changed.value.code == "IdempotencyConflict"
    assert drain(endpoint, credentials, sink) == [b"A"]


def test_a_step_too_big_for_one_transaction_is_refused_and_stores_nothing(
    endpoint, credentials, stage, make_topic, cirrusmq_stack
):
    source, _, group, producer_group = stage
    wide = make_topic("wide", message_type="FIFO", queues=64)
    with (
        ExactlyOnceProducer(endpoint, credentials, producer_group=producer_group) as producer,
        consumer_of(endpoint, credentials, group, source) as consumer,
    ):
        [message] = consumer.receive(1, 30)
        with pytest.raises(StepTooLargeError) as refused, producer.exactly_once(consumer) as step:
            for n in range(300):
                step.send(Message(wide, b"x", message_group=f"k{n}"))
            step.ack(message)

    assert refused.value.http_status == 400 and refused.value.details["max_items"] == 100
    assert raw_topic_keys(cirrusmq_stack, wide) == []


def test_the_async_producer_commits_a_step(endpoint, credentials, stage, cirrusmq_stack):
    source, sink, group, producer_group = stage

    async def run() -> None:
        async with (
            AsyncExactlyOnceProducer(
                endpoint, credentials, producer_group=producer_group
            ) as producer,
            AsyncSimpleConsumer(endpoint, credentials, group, [source], await_duration=0) as c,
        ):
            for message in await c.receive(10, 30):
                async with producer.exactly_once(c) as step:
                    step.send(Message(sink, message.body.upper()))
                    step.ack(message)
                assert step.result.acked == 1

    asyncio.run(run())
    assert drain(endpoint, credentials, sink) == [b"ORDER-0", b"ORDER-1", b"ORDER-2"]
