"""SQS visibility semantics on a standard queue: VisibilityTimeout 0-43,200 s (0 releases
a message at once), redelivery as soon as the visibility timeout passes, a long poll that
returns a message becoming visible while it waits, and old receipt handles after a
redelivery."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from .sqs_helpers import error_code, queue_name, sqs  # noqa: F401 - fixtures

OUT_OF_RANGE = (
    "Value {} for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, "
    "if provided."
)
STALE_HANDLE = (
    "Value {} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is "
    "not available for visibility timeout change."
)


def _one(sqs, url: str, **options: Any) -> dict[str, Any]:  # noqa: F811
    (message,) = sqs.receive_message(
        QueueUrl=url, AttributeNames=["ApproximateReceiveCount"], **options
    )["Messages"]
    return message


def _count(message: dict[str, Any]) -> int:
    return int(message["Attributes"]["ApproximateReceiveCount"])


def _while_polling(action: Callable[[], Any]) -> threading.Timer:
    """Run ``action`` a second from now (while a long poll started meanwhile waits)."""
    timer = threading.Timer(1.0, action)
    timer.start()
    return timer


# ------------------------------------------------------------------- timeout 0 and range
def test_a_receive_with_visibility_timeout_zero_leaves_the_message_visible(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="peek")
    first = _one(sqs, url, VisibilityTimeout=0)
    again = _one(sqs, url)
    assert first["MessageId"] == again["MessageId"] == sent["MessageId"]
    assert (_count(first), _count(again)) == (1, 2)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_change_visibility_to_zero_releases_the_message_at_once(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "600"})[
        "QueueUrl"
    ]
    sqs.send_message(QueueUrl=url, MessageBody="release me")
    first = _one(sqs, url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
    )
    again = _one(sqs, url)
    assert again["MessageId"] == first["MessageId"]
    assert _count(again) == 2


def test_change_visibility_batch_to_zero_releases_each_message(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message_batch(
        QueueUrl=url, Entries=[{"Id": str(n), "MessageBody": f"m{n}"} for n in range(3)]
    )
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600)
    messages = received["Messages"]
    while len(messages) < 3:  # a receive may answer from fewer queues than hold messages
        messages += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600
        )["Messages"]
    released, kept = messages[:2], messages[2]
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": f"e{n}", "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
            for n, m in enumerate(released)
        ],
    )
    assert sorted(s["Id"] for s in answer["Successful"]) == ["e0", "e1"]
    again: list[dict[str, Any]] = []
    for _ in range(4):
        again += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    assert sorted(m["MessageId"] for m in again) == sorted(m["MessageId"] for m in released)
    assert kept["MessageId"] not in {m["MessageId"] for m in again}


@pytest.mark.parametrize("timeout", [-1, 43201])
def test_a_visibility_timeout_outside_0_to_43200_is_refused(sqs, queue_name, timeout) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.receive_message(QueueUrl=url, VisibilityTimeout=timeout)
    assert error_code(refused.value) == "InvalidParameterValue"
    assert refused.value.response["Error"]["Message"] == OUT_OF_RANGE.format(timeout)
    message = _one(sqs, url, VisibilityTimeout=43200)
    handle = message["ReceiptHandle"]
    with pytest.raises(sqs.exceptions.ClientError) as changed:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=timeout)
    assert error_code(changed.value) == "InvalidParameterValue"
    assert changed.value.response["Error"]["Message"] == OUT_OF_RANGE.format(timeout)
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": handle, "VisibilityTimeout": timeout}]
    )
    assert [(f["Id"], f["Code"], f["Message"]) for f in answer["Failed"]] == [
        ("a", "InvalidParameterValue", OUT_OF_RANGE.format(timeout))
    ]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)  # still invisible


# ------------------------------------------------------------------ redelivery at once
def test_a_message_is_receivable_again_as_soon_as_its_visibility_timeout_passes(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="again and again")
    first = _one(sqs, url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    cirrusmq_stack.advance_time(21)
    second = _one(sqs, url)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    cirrusmq_stack.advance_time(21)
    third = _one(sqs, url)
    assert first["MessageId"] == second["MessageId"] == third["MessageId"]
    assert [_count(m) for m in (first, second, third)] == [1, 2, 3]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=third["ReceiptHandle"])
    cirrusmq_stack.advance_time(21)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_max_receive_count_still_sends_the_message_to_the_dead_letter_queue(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    policy = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 3})
    url = sqs.create_queue(
        QueueName=queue_name, Attributes={"RedrivePolicy": policy, "VisibilityTimeout": "10"}
    )["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="poison")
    counts = []
    for _ in range(3):
        counts.append(_count(_one(sqs, url)))
        cirrusmq_stack.advance_time(11)
    assert counts == [1, 2, 3]
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    (dead,) = sqs.receive_message(QueueUrl=dlq_url, WaitTimeSeconds=2)["Messages"]
    assert (dead["MessageId"], dead["Body"]) == (sent["MessageId"], "poison")


def _newer_messages_on_every_topic_queue(sqs, url: str, prefix: str) -> None:  # noqa: F811
    """24 sends (a send goes to one topic queue, the next send to the next)."""
    for n in range(24):
        sqs.send_message(QueueUrl=url, MessageBody=f"{prefix} {n}")


def test_a_message_whose_visibility_timeout_passed_comes_before_newer_messages(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """As SQS (LocalStack's validated ``test_inflight_message_requeue``): once its visibility
    timeout passed, the older message is received first, whichever topic queue the newer
    ones went to."""
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    old = sqs.send_message(QueueUrl=url, MessageBody="old")
    assert _one(sqs, url)["MessageId"] == old["MessageId"]
    _newer_messages_on_every_topic_queue(sqs, url, "new")
    for attempt in range(2, 7):  # a random first queue would pick a newer one 7 times in 8
        cirrusmq_stack.advance_time(21)
        again = _one(sqs, url)
        assert (again["MessageId"], _count(again)) == (old["MessageId"], attempt)
        newer = _one(sqs, url)  # the next receive serves the queues in turn
        assert newer["MessageId"] != old["MessageId"]
        sqs.delete_message(QueueUrl=url, ReceiptHandle=newer["ReceiptHandle"])


def test_a_message_released_again_and_again_does_not_take_every_receive(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """A consumer that puts a message it cannot handle back at once (visibility 0), one
    message per receive, still gets the newer messages of the other topic queues."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    poison = sqs.send_message(QueueUrl=url, MessageBody="poison")["MessageId"]
    _newer_messages_on_every_topic_queue(sqs, url, "new")
    others = 0
    for _ in range(16):
        message = _one(sqs, url)
        if message["MessageId"] == poison:
            sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
        else:
            others += 1
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    assert others >= 6


def test_a_peek_with_visibility_timeout_zero_sees_more_than_the_oldest_message(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    _newer_messages_on_every_topic_queue(sqs, url, "m")
    seen = {_one(sqs, url, VisibilityTimeout=0)["MessageId"] for _ in range(16)}
    assert len(seen) >= 4


# ------------------------------------------------------------------------- long polls
def test_a_long_poll_returns_a_message_whose_visibility_timeout_passes_while_it_waits(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="comes back")
    first = _one(sqs, url)
    timer = _while_polling(lambda: cirrusmq_stack.advance_time(31))
    try:
        again = _one(sqs, url, WaitTimeSeconds=20)
    finally:
        timer.join()
    assert again["MessageId"] == first["MessageId"]
    assert _count(again) == 2


def test_a_long_poll_returns_a_message_released_while_it_waits(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "600"})[
        "QueueUrl"
    ]
    sqs.send_message(QueueUrl=url, MessageBody="released")
    first = _one(sqs, url)
    timer = _while_polling(
        lambda: sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0
        )
    )
    try:
        again = _one(sqs, url, WaitTimeSeconds=20)
    finally:
        timer.join()
    assert again["MessageId"] == first["MessageId"]


# ------------------------------------------------------------------- old receipt handles
def test_an_old_handle_after_a_redelivery_deletes_nothing_without_error(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="twice")
    old = _one(sqs, url)
    cirrusmq_stack.advance_time(21)
    latest = _one(sqs, url)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])  # succeeds ...
    cirrusmq_stack.advance_time(21)
    back = _one(sqs, url)  # ... but the message stays
    assert back["MessageId"] == latest["MessageId"] == old["MessageId"]
    assert _count(back) == 3
    sqs.delete_message(QueueUrl=url, ReceiptHandle=back["ReceiptHandle"])
    cirrusmq_stack.advance_time(21)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_the_first_handle_releases_the_message_of_a_later_receive_at_once(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sent = sqs.send_message(QueueUrl=url, MessageBody="twice")
    first = _one(sqs, url)["ReceiptHandle"]
    cirrusmq_stack.advance_time(21)
    again = _one(sqs, url, VisibilityTimeout=600)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first, VisibilityTimeout=0)
    back = _one(sqs, url)
    assert back["MessageId"] == again["MessageId"] == sent["MessageId"]
    assert _count(back) == 3


def test_an_old_handle_after_a_redelivery_changes_the_visibility_of_the_latest_receive(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="twice")
    old = _one(sqs, url)["ReceiptHandle"]
    cirrusmq_stack.advance_time(21)
    latest = _one(sqs, url)["ReceiptHandle"]
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old, VisibilityTimeout=60)
    cirrusmq_stack.advance_time(40)  # past the receive's 20 s, within the 60 s set
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    answer = sqs.change_message_visibility_batch(
        QueueUrl=url,
        Entries=[
            {"Id": "old", "ReceiptHandle": old, "VisibilityTimeout": 60},
            {"Id": "latest", "ReceiptHandle": latest, "VisibilityTimeout": 60},
        ],
    )
    assert sorted(s["Id"] for s in answer["Successful"]) == ["latest", "old"]
    assert "Failed" not in answer or answer["Failed"] == []
    sqs.delete_message(QueueUrl=url, ReceiptHandle=latest)
    with pytest.raises(sqs.exceptions.ClientError) as refused:  # deleted: nothing to change
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=old, VisibilityTimeout=0)
    assert error_code(refused.value) == "InvalidParameterValue"
    assert refused.value.response["Error"]["Message"] == STALE_HANDLE.format(old)


def test_the_latest_handle_deletes_after_its_visibility_timeout_passed(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="late delete")
    handle = _one(sqs, url)["ReceiptHandle"]
    cirrusmq_stack.advance_time(21)
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    cirrusmq_stack.advance_time(21)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)


def test_a_deleted_message_cannot_change_visibility(sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="done")
    handle = _one(sqs, url)["ReceiptHandle"]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    assert error_code(refused.value) == "InvalidParameterValue"
    assert refused.value.response["Error"]["Message"] == STALE_HANDLE.format(handle)


def test_a_message_whose_visibility_timeout_passed_counts_as_visible(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="counted")
    _one(sqs, url)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]

    def counts() -> tuple[str, str]:
        shown = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
        return shown[names[0]], shown[names[1]]

    assert counts() == ("0", "1")
    cirrusmq_stack.advance_time(21)
    assert counts() == ("1", "0")
    _one(sqs, url)
    assert counts() == ("0", "1")


def test_a_message_never_deleted_does_not_hold_back_the_queue(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
    monkeypatch,
) -> None:
    """SQS has no bound behind an undeleted message: with CirrusMQ's flow control made small
    (the stack's functions run in this process), a poison message never deleted (no
    RedrivePolicy) still lets every message behind it through, each once, and the counts
    end with the poison alone."""
    from cirrusmq_broker import limits

    monkeypatch.setattr(limits, "MAX_INFLIGHT_PER_QUEUE", 4)
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="poison")
    bodies = [f"m{i}" for i in range(60)]
    for body in bodies:  # one by one: spread over the topic queues, the poison's too
        sqs.send_message(QueueUrl=url, MessageBody=body)
    received: list[str] = []
    poison_counts: list[int] = []
    for _ in range(80):
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=10,
            AttributeNames=["ApproximateReceiveCount"],
        ).get("Messages", [])  # fmt: skip
        for m in got:
            if m["Body"] == "poison":
                poison_counts.append(int(m["Attributes"]["ApproximateReceiveCount"]))
                continue
            received.append(m["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        if len(received) >= len(bodies):
            break
        cirrusmq_stack.advance_time(11)
    assert sorted(received) == sorted(bodies)  # every one, none twice
    assert poison_counts == list(range(1, len(poison_counts) + 1))
    cirrusmq_stack.advance_time(11)
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert (
        int(counts["ApproximateNumberOfMessages"])
        + int(counts["ApproximateNumberOfMessagesNotVisible"])
        == 1
    )  # the poison, still there


# ------------------------------------------------------------------- the 12-hour limit
BEYOND_LIMIT = (
    "Value {} for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout "
    "for the message is beyond the limit [43200 seconds]"
)


def test_visibility_ends_at_most_12_hours_after_the_receive(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """SQS measures the 12-hour limit from the ReceiveMessage that issued the handle:
    extending the visibility does not reset it; a new receive does."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="long work")
    message = _one(sqs, url, VisibilityTimeout=7200)
    handle = message["ReceiptHandle"]
    cirrusmq_stack.advance_time(3600)
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=39000)
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=39601)
    error = caught.value.response["Error"]
    assert (error["Code"], error["Message"]) == (
        "InvalidParameterValue",
        BEYOND_LIMIT.format(39601),
    )
    batch = sqs.change_message_visibility_batch(
        QueueUrl=url, Entries=[{"Id": "a", "ReceiptHandle": handle, "VisibilityTimeout": 43200}]
    )
    ((failed,),) = [batch["Failed"]]
    assert (failed["Id"], failed["Code"], failed["SenderFault"]) == (
        "a", "InvalidParameterValue", True,
    )  # fmt: skip
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
    again = _one(sqs, url)  # a new receive: 12 hours from now
    sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle=again["ReceiptHandle"], VisibilityTimeout=43000
    )
    sqs.delete_message(QueueUrl=url, ReceiptHandle=again["ReceiptHandle"])
    assert "Messages" not in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)


def test_a_handle_whose_receive_time_is_thousands_of_digits_is_invalid_not_a_500(
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
):
    """The receive time after ``~`` is base 36 text from the client: past Python's limit on
    digits ``int()`` raised ValueError, an InternalError for delete and visibility change.
    The message stays, and its real handle still deletes it."""
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    handle = _one(sqs, url)["ReceiptHandle"]
    forged = handle.rpartition("~")[0] + "~" + "z" * 5000
    for call in (
        lambda: sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=forged, VisibilityTimeout=60
        ),
        lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle=forged),
    ):
        with pytest.raises(Exception) as raised:
            call()
        assert error_code(raised.value) == "ReceiptHandleIsInvalid"
    sqs.delete_message(QueueUrl=url, ReceiptHandle=handle)


def test_first_handles_release_messages_redelivered_one_receive_each(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name, Attributes={"VisibilityTimeout": "20"})["QueueUrl"]
    for body in ("a", "b"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    first = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    if len(first) < 2:
        first += sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(m["Body"] for m in first) == ["a", "b"]
    cirrusmq_stack.advance_time(21)
    again = [_one(sqs, url, MaxNumberOfMessages=1, VisibilityTimeout=600) for _ in range(2)]
    assert sorted(m["Body"] for m in again) == ["a", "b"]
    for message in first:
        sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
        )
    back = [_one(sqs, url, MaxNumberOfMessages=1) for _ in range(2)]
    assert sorted(m["Body"] for m in back) == ["a", "b"]
