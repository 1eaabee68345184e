"""SQS FIFO sends as SQS answers them: deduplication for exactly 5 minutes from the first
accepted send (whatever the clock's interval boundaries), sequence numbers in send answers
and receives, the FIFO system attributes, and SQS's refusals of incomplete sends."""

from __future__ import annotations

import threading

import pytest
from cirrusmq_broker import clock
from cirrusmq_broker.storage.appends import BatchAppender

from .sqs_helpers import error_code, queue_name, sqs, sqs_client  # noqa: F401 - fixtures

INTERVAL_S = 300


def _fifo(sqs, name: str, **attributes: str) -> str:  # noqa: F811
    return sqs.create_queue(
        QueueName=f"{name}.fifo", Attributes={"FifoQueue": "true", **attributes}
    )["QueueUrl"]


def test_a_send_and_its_retry_across_a_five_minute_boundary_store_one_message(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    monkeypatch,
) -> None:
    """The first attempt is still appending when the clock passes a multiple of 5 minutes
    and the client's retry arrives: one message is stored, both answers name it."""
    url = _fifo(sqs, queue_name, ContentBasedDeduplication="true")
    interval_ms = INTERVAL_S * 1000
    # to 1 s before the next multiple of 5 minutes (the one after, inside the last second)
    cirrusmq_stack.advance_time(((interval_ms - 1_000 - clock.now_ms()) % interval_ms) / 1000)
    entered, release = threading.Event(), threading.Event()
    append = BatchAppender.append
    held: list[bool] = []

    def held_append(self, batches, **kwargs):
        if kwargs.get("stamp") is not None and not held:
            held.append(True)
            entered.set()
            release.wait(60)
        return append(self, batches, **kwargs)

    monkeypatch.setattr(BatchAppender, "append", held_append)
    answers: dict[str, dict] = {}
    first_client = sqs_client(cirrusmq_stack)

    def first_attempt() -> None:
        answers["first"] = first_client.send_message(
            QueueUrl=url, MessageBody="once", MessageGroupId="g"
        )

    sender = threading.Thread(target=first_attempt)
    sender.start()
    try:
        assert entered.wait(60)
        cirrusmq_stack.advance_time(2)  # the next 5-minute interval, 2 s after the first send
        answers["retry"] = sqs.send_message(QueueUrl=url, MessageBody="once", MessageGroupId="g")
    finally:
        release.set()
        sender.join(60)
        first_client.close()
    assert answers["first"]["MessageId"] == answers["retry"]["MessageId"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
    assert [m["Body"] for m in received["Messages"]] == ["once"]


def test_deduplication_ends_five_minutes_after_the_first_accepted_send(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = _fifo(sqs, queue_name)
    first = sqs.send_message(
        QueueUrl=url, MessageBody="a", MessageGroupId="g", MessageDeduplicationId="d"
    )
    cirrusmq_stack.advance_time(INTERVAL_S - 1)
    repeat = sqs.send_message(
        QueueUrl=url, MessageBody="b", MessageGroupId="g", MessageDeduplicationId="d"
    )
    assert repeat["MessageId"] == first["MessageId"]
    assert repeat["SequenceNumber"] == first["SequenceNumber"]
    cirrusmq_stack.advance_time(2)
    later = sqs.send_message(
        QueueUrl=url, MessageBody="c", MessageGroupId="g", MessageDeduplicationId="d"
    )
    assert later["MessageId"] != first["MessageId"]
    assert int(later["SequenceNumber"]) > int(first["SequenceNumber"])
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in received] == ["a", "c"]


def test_sequence_numbers_and_fifo_system_attributes(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo(sqs, queue_name)
    one = sqs.send_message(
        QueueUrl=url, MessageBody="one", MessageGroupId="g", MessageDeduplicationId="d1"
    )
    batch = sqs.send_message_batch(
        QueueUrl=url,
        Entries=[
            {"Id": n, "MessageBody": n, "MessageGroupId": "g", "MessageDeduplicationId": d}
            for n, d in (("two", "d2"), ("three", "d3"))
        ],
    )
    numbers = [one["SequenceNumber"]] + [s["SequenceNumber"] for s in batch["Successful"]]
    assert all(len(n) == 20 and n.isdigit() for n in numbers)
    assert [int(n) for n in numbers] == sorted(int(n) for n in numbers)
    assert len(set(numbers)) == 3
    received = sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"]
    )["Messages"]
    assert [m["Attributes"]["SequenceNumber"] for m in received] == numbers
    assert [m["Attributes"]["MessageDeduplicationId"] for m in received] == ["d1", "d2", "d3"]
    assert {m["Attributes"]["MessageGroupId"] for m in received} == {"g"}


def test_a_standard_queue_answers_no_sequence_number(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    answer = sqs.send_message(QueueUrl=url, MessageBody="x")
    assert "SequenceNumber" not in answer
    (received,) = sqs.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"]
    assert "SequenceNumber" not in received["Attributes"]


@pytest.mark.parametrize(
    ("send", "code", "message"),
    [
        (
            {"MessageDeduplicationId": "d"},
            "MissingParameter",
            "The request must contain the parameter MessageGroupId.",
        ),
        (
            {"MessageGroupId": "g"},
            "InvalidParameterValue",
            "The queue should either have ContentBasedDeduplication enabled or "
            "MessageDeduplicationId provided explicitly",
        ),
        (
            {"MessageGroupId": "g", "MessageDeduplicationId": "d", "DelaySeconds": 5},
            "InvalidParameterValue",
            "Value 5 for parameter DelaySeconds is invalid. Reason: The request include "
            "parameter that is not valid for this queue type.",
        ),
    ],
)
def test_incomplete_fifo_sends_are_refused_as_sqs_refuses_them(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    send,
    code,
    message,
) -> None:
    url = _fifo(sqs, queue_name)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.send_message(QueueUrl=url, MessageBody="x", **send)
    assert error_code(caught.value) == code
    assert caught.value.response["Error"]["Message"] == message
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_deduplication_scope_message_group_deduplicates_within_a_group(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = _fifo(sqs, queue_name, DeduplicationScope="messageGroup")
    first = sqs.send_message(
        QueueUrl=url, MessageBody="a", MessageGroupId="g1", MessageDeduplicationId="d"
    )
    other_group = sqs.send_message(
        QueueUrl=url, MessageBody="b", MessageGroupId="g2", MessageDeduplicationId="d"
    )
    repeat = sqs.send_message(
        QueueUrl=url, MessageBody="c", MessageGroupId="g1", MessageDeduplicationId="d"
    )
    assert other_group["MessageId"] != first["MessageId"] == repeat["MessageId"]
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in received) == ["a", "b"]


def test_deduplication_scope_queue_deduplicates_across_groups(sqs, queue_name) -> None:  # noqa: F811
    url = _fifo(sqs, queue_name)
    first = sqs.send_message(
        QueueUrl=url, MessageBody="a", MessageGroupId="g1", MessageDeduplicationId="d"
    )
    other_group = sqs.send_message(
        QueueUrl=url, MessageBody="b", MessageGroupId="g2", MessageDeduplicationId="d"
    )
    assert other_group["MessageId"] == first["MessageId"]
    assert other_group["SequenceNumber"] == first["SequenceNumber"]
