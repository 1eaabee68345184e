"""SQS message move tasks: StartMessageMoveTask to the sources or to DestinationArn,
ListMessageMoveTasks, CancelMessageMoveTask and their errors, as the SQS API defines them."""

from __future__ import annotations

import json

import pytest

from .sqs_helpers import error_code, queue_name, sqs  # noqa: F401 - fixtures


def _arn(sqs, url: str) -> str:  # noqa: F811
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]


def _dead_letters(stack, sqs, name: str, bodies: list[str]) -> tuple[str, str, str]:  # noqa: F811
    """A source queue (maxReceiveCount 1) whose ``bodies`` are all in its dead-letter queue:
    (source url, dead-letter queue url, its ARN)."""
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = _arn(sqs, dlq_url)
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    url = sqs.create_queue(QueueName=name, Attributes={"RedrivePolicy": policy})["QueueUrl"]
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body)
    got = 0
    while got < len(bodies):
        got += len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))
    stack.advance_time(31)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    return url, dlq_url, arn


def _bodies(sqs, url: str) -> list[str]:  # noqa: F811
    found: list[str] = []
    while received := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages"):
        found += [m["Body"] for m in received]
        for m in received:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    return sorted(found)


def test_a_move_task_to_another_queue_is_listed_completed(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url, dlq_url, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a", "b"])
    other = sqs.create_queue(QueueName=f"{queue_name}-other")["QueueUrl"]
    other_arn = _arn(sqs, other)
    started = sqs.start_message_move_task(
        SourceArn=arn, DestinationArn=other_arn, MaxNumberOfMessagesPerSecond=100
    )
    assert started["TaskHandle"]
    assert _bodies(sqs, other) == ["a", "b"]
    assert _bodies(sqs, url) == []
    assert _bodies(sqs, dlq_url) == []
    (task,) = sqs.list_message_move_tasks(SourceArn=arn)["Results"]
    assert task["Status"] == "COMPLETED"
    assert task["SourceArn"] == arn
    assert task["DestinationArn"] == other_arn
    assert task["MaxNumberOfMessagesPerSecond"] == 100
    assert task["ApproximateNumberOfMessagesMoved"] == 2
    assert task["ApproximateNumberOfMessagesToMove"] == 2
    assert task["StartedTimestamp"] > 0
    assert "TaskHandle" not in task  # only a running task has one


def test_list_message_move_tasks_newest_first(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url, _, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a"])
    sqs.start_message_move_task(SourceArn=arn)
    assert _bodies(sqs, url) == ["a"]
    cirrusmq_stack.advance_time(1)
    sqs.start_message_move_task(SourceArn=arn)
    tasks = sqs.list_message_move_tasks(SourceArn=arn, MaxResults=10)["Results"]
    assert [t["ApproximateNumberOfMessagesMoved"] for t in tasks] == [0, 1]
    assert all("DestinationArn" not in t for t in tasks)
    assert len(sqs.list_message_move_tasks(SourceArn=arn)["Results"]) == 1  # MaxResults 1


def test_move_task_errors(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    plain = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.start_message_move_task(SourceArn=_arn(sqs, plain))
    assert error_code(caught.value) == "UnsupportedOperation"  # not a dead-letter queue
    missing = "arn:aws:sqs:eu-west-3:000000000000:" + queue_name + "-missing"
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.start_message_move_task(SourceArn=missing)
    assert error_code(caught.value) == "ResourceNotFoundException"
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.list_message_move_tasks(SourceArn=missing)
    assert error_code(caught.value) == "ResourceNotFoundException"
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.cancel_message_move_task(TaskHandle="no-such-task")
    assert error_code(caught.value) == "ResourceNotFoundException"
    _, _, arn = _dead_letters(cirrusmq_stack, sqs, f"{queue_name}-s", ["a"])
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.start_message_move_task(SourceArn=arn, MaxNumberOfMessagesPerSecond=501)
    assert error_code(caught.value) == "InvalidParameterValue"
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.start_message_move_task(SourceArn=arn, DestinationArn=missing)
    assert error_code(caught.value) == "ResourceNotFoundException"
    assert sqs.list_message_move_tasks(SourceArn=arn)["Results"] == []  # nothing stored


def test_a_finished_task_cannot_be_cancelled(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    _, _, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a"])
    handle = sqs.start_message_move_task(SourceArn=arn)["TaskHandle"]
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.cancel_message_move_task(TaskHandle=handle)
    assert error_code(caught.value) == "ResourceNotFoundException"


def test_a_move_task_into_its_own_source_queue_is_refused(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    """Moving a queue's messages into itself never ends (each step receives what the last
    appended): refused, nothing stored, the messages stay as they were."""
    _, dlq_url, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a", "b"])
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.start_message_move_task(SourceArn=arn, DestinationArn=arn)
    assert error_code(caught.value) == "InvalidParameterValue"
    assert sqs.list_message_move_tasks(SourceArn=arn)["Results"] == []
    assert _bodies(sqs, dlq_url) == ["a", "b"]


def test_a_sender_cannot_name_the_queue_a_move_task_sends_its_message_to(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """A dead letter's source queue is a hidden property that a move task without
    DestinationArn routes by. A key that may publish only to the dead-letter queue must not
    set it (a message attribute of that name) and so have a move task put its message into
    another source queue, which it may not publish to: the attribute is refused."""
    from .sqs_helpers import new_sqs_key, sqs_client

    url, dlq_url, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a"])
    other_policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    other = sqs.create_queue(
        QueueName=f"{queue_name}-other", Attributes={"RedrivePolicy": other_policy}
    )["QueueUrl"]
    key, secret = new_sqs_key(cirrusmq_stack, {"publish": [f"{queue_name}-dlq"]})
    sender = sqs_client(cirrusmq_stack, key, secret)
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sender.send_message(
            QueueUrl=dlq_url,
            MessageBody="smuggled",
            MessageAttributes={
                "sqs.source": {"DataType": "String", "StringValue": f"{queue_name}-other"}
            },
        )
    assert error_code(refused.value) == "InvalidParameterValue"
    sqs.start_message_move_task(SourceArn=arn)
    assert _bodies(sqs, other) == []
    assert _bodies(sqs, url) == ["a"]


def test_a_fifo_dead_letter_queue_moves_to_fifo_queues_only(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """SQS redrives FIFO dead-letter queues (since November 2023) to a FIFO destination:
    a standard destination is refused and nothing is stored."""
    fifo = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    dlq_url = sqs.create_queue(QueueName=f"{queue_name}-dlq.fifo", Attributes=fifo)["QueueUrl"]
    arn = _arn(sqs, dlq_url)
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    url = sqs.create_queue(
        QueueName=f"{queue_name}.fifo", Attributes={**fifo, "RedrivePolicy": policy}
    )["QueueUrl"]
    for body in ["a", "b"]:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g")
    got = 0
    while got < 2:
        got += len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []))
    cirrusmq_stack.advance_time(31)
    assert "Messages" not in sqs.receive_message(QueueUrl=url)
    standard = sqs.create_queue(QueueName=f"{queue_name}-standard")["QueueUrl"]
    with pytest.raises(sqs.exceptions.ClientError) as caught:
        sqs.start_message_move_task(SourceArn=arn, DestinationArn=_arn(sqs, standard))
    assert error_code(caught.value) == "InvalidParameterValue"
    assert sqs.list_message_move_tasks(SourceArn=arn)["Results"] == []
    assert sqs.start_message_move_task(SourceArn=arn)["TaskHandle"]
    assert _bodies(sqs, url) == ["a", "b"]
    assert _bodies(sqs, dlq_url) == []
    (task,) = sqs.list_message_move_tasks(SourceArn=arn)["Results"]
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 2)


def test_the_scheduled_resume_finds_no_task_once_tasks_ended(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """The janitor's ResumeMoveTasks schedule (run by the stack's timer) goes on with running
    tasks only: a completed task is not run again."""
    _, _, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a"])
    handle = sqs.start_message_move_task(SourceArn=arn)["TaskHandle"]
    (task,) = sqs.list_message_move_tasks(SourceArn=arn)["Results"]
    assert task["Status"] == "COMPLETED"
    resumed = cirrusmq_stack.run_schedule("JanitorFunction", "ResumeMoveTasks")["resumed"]
    assert all(handle not in str(entry) for entry in resumed)
    (task,) = sqs.list_message_move_tasks(SourceArn=arn)["Results"]
    assert (task["Status"], task["ApproximateNumberOfMessagesMoved"]) == ("COMPLETED", 1)


def test_a_native_publisher_cannot_route_a_dead_letter_queue_message_by_sqs_source(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    """Over the CirrusMQ API, a key that may publish only to a dead-letter queue's topic sets
    the property ``sqs.source`` to another source queue: a move task without DestinationArn
    must not put the message there (it routes only what the dead-letter move wrote)."""
    from cirrusmq import Credentials, Message, Producer

    from .sqs_helpers import new_sqs_key

    url, _, arn = _dead_letters(cirrusmq_stack, sqs, queue_name, ["a"])
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 1})
    other = sqs.create_queue(QueueName=f"{queue_name}-other", Attributes={"RedrivePolicy": policy})[
        "QueueUrl"
    ]
    key, secret = new_sqs_key(cirrusmq_stack, {"publish": [f"{queue_name}-dlq"]})
    with Producer(cirrusmq_stack.endpoint, Credentials(key, secret)) as producer:
        producer.send(
            Message(
                f"{queue_name}-dlq", "smuggled", properties={"sqs.source": f"{queue_name}-other"}
            )
        )
    sqs.start_message_move_task(SourceArn=arn)
    assert _bodies(sqs, other) == []
    assert _bodies(sqs, url) == ["a"]
