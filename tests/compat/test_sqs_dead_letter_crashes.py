"""SQS dead letters and move tasks lose nothing and send nothing twice when a Lambda dies
between their steps, then the client (or the next receive) runs them again.

The handlers run in the local stack's process: a crash is an append that commits and then
raises ``SimulatedCrash`` (a BaseException no handler catches; the gateway answers 5xx)."""

from __future__ import annotations

import contextlib
import json

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from cirrusmq_broker.storage.appends import BatchAppender

from .sqs_helpers import REGION, queue_name, sqs  # noqa: F401 - fixtures


class SimulatedCrash(BaseException):
    """The Lambda process dies at this point."""


_append = BatchAppender.append


def crash_after_an_append_to(topic: str | None):
    """An append (into ``topic``, or any when None) commits, then the Lambda dies; once."""
    fired = []

    def append(self, batches, **kwargs):
        result = _append(self, batches, **kwargs)
        if not fired and (topic is None or any(b.topic == topic for b in batches)):
            fired.append(True)
            raise SimulatedCrash()
        return result

    return append


def _queues(sqs, name: str, max_receive_count: int = 1) -> tuple[str, str, str]:  # noqa: F811
    """(source url, dead-letter queue url, its ARN)."""
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": max_receive_count})
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return url, dlq_url, arn


def _let_die(stack, sqs, url: str, count: int) -> None:  # noqa: F811
    """Receive ``count`` messages once (maxReceiveCount 1) and let their leases expire."""
    got = 0
    while got < count:
        got += len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))
    stack.advance_time(31)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # the expiry moves them on


def _drain(stack, sqs, url: str) -> list[str]:  # noqa: F811
    """Every body the queue delivers, deleting each; time moves on past leases and backoffs
    until two passes find nothing."""
    bodies: list[str] = []
    empty = 0
    while empty < 2:
        received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        for m in received:
            bodies.append(m["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        if not received:
            empty += 1
            stack.advance_time(120)
    return sorted(bodies)


@pytest.fixture
def once(cirrusmq_stack):
    """An SQS client that sends each request once (botocore retries nothing): the client
    gives up on a request whose Lambda died."""
    credentials = cirrusmq_stack.credentials
    client = boto3.session.Session().client(
        "sqs",
        endpoint_url=cirrusmq_stack.endpoint,
        region_name=REGION,
        aws_access_key_id=credentials.access_key,
        aws_secret_access_key=credentials.secret_key,
        config=Config(retries={"total_max_attempts": 1}),
    )
    yield client
    client.close()


def _dying(call) -> None:
    """A request whose Lambda may die: its 5xx (or dropped connection) is ignored."""
    with contextlib.suppress(ClientError, BotoCoreError):
        call()


def test_a_dead_letter_queue_receive_that_dies_loses_no_letter(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    once,
    monkeypatch,
) -> None:
    url, dlq_url, _ = _queues(sqs, queue_name)
    sqs.send_message(QueueUrl=url, MessageBody="first")
    _let_die(cirrusmq_stack, sqs, url, 1)
    monkeypatch.setattr(BatchAppender, "append", crash_after_an_append_to(None))
    _dying(lambda: once.receive_message(QueueUrl=dlq_url, VisibilityTimeout=0))
    monkeypatch.undo()

    sqs.send_message(QueueUrl=url, MessageBody="second")  # a longer page for the re-run
    _let_die(cirrusmq_stack, sqs, url, 1)
    assert _drain(cirrusmq_stack, sqs, dlq_url) == ["first", "second"]


def test_a_move_task_that_dies_sends_nothing_twice(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    once,
    monkeypatch,
) -> None:
    url, dlq_url, arn = _queues(sqs, queue_name)
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"poison {n}")
    _let_die(cirrusmq_stack, sqs, url, 3)
    monkeypatch.setattr(BatchAppender, "append", crash_after_an_append_to(queue_name))
    _dying(lambda: once.start_message_move_task(SourceArn=arn))
    monkeypatch.undo()

    cirrusmq_stack.advance_time(3600)  # whatever the dead run held is free again
    sqs.start_message_move_task(SourceArn=arn)  # the client's retry
    assert _drain(cirrusmq_stack, sqs, url) == ["poison 0", "poison 1", "poison 2"]
    assert _drain(cirrusmq_stack, sqs, dlq_url) == []


@pytest.mark.parametrize("dies", ["before", "after"])
def test_a_move_task_that_dies_loses_nothing(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    once,
    monkeypatch,
    dies,
) -> None:
    url, dlq_url, arn = _queues(sqs, queue_name)
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f"poison {n}")
    _let_die(cirrusmq_stack, sqs, url, 3)

    def crash_before(self, batches, **kwargs):
        if any(b.topic == queue_name for b in batches):
            raise SimulatedCrash()
        return _append(self, batches, **kwargs)

    dying = crash_before if dies == "before" else crash_after_an_append_to(queue_name)
    monkeypatch.setattr(BatchAppender, "append", dying)
    _dying(lambda: once.start_message_move_task(SourceArn=arn))
    monkeypatch.undo()

    cirrusmq_stack.advance_time(3600)
    sqs.start_message_move_task(SourceArn=arn)
    moved = _drain(cirrusmq_stack, sqs, url)
    left = _drain(cirrusmq_stack, sqs, dlq_url)
    assert sorted(moved + left) == ["poison 0", "poison 1", "poison 2"]
    assert left == []
