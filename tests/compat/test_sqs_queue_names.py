"""Queue names: a standard queue ``x_fifo`` and a FIFO queue ``x.fifo`` are two queues."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from .sqs_helpers import error_code, queue_name, sqs  # noqa: F401 - fixtures


def test_a_standard_queue_named_like_a_fifo_topic_is_its_own_queue(sqs, queue_name) -> None:  # noqa: F811
    standard = sqs.create_queue(QueueName=f"{queue_name}_fifo")["QueueUrl"]
    fifo = sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})[
        "QueueUrl"
    ]
    assert standard != fifo
    assert sorted(sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"]) == sorted(
        [standard, fifo]
    )
    sqs.send_message(QueueUrl=standard, MessageBody="standard")
    sqs.send_message(
        QueueUrl=fifo, MessageBody="fifo", MessageGroupId="g", MessageDeduplicationId="d"
    )
    (one,) = sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=10)["Messages"]
    (other,) = sqs.receive_message(QueueUrl=fifo, MaxNumberOfMessages=10)["Messages"]
    assert (one["Body"], other["Body"]) == ("standard", "fifo")
    sqs.delete_queue(QueueUrl=standard)
    assert sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"] == [fifo]


def test_a_standard_queue_x_fifo_of_an_earlier_release_keeps_working(sqs, queue_name) -> None:  # noqa: F811
    """An earlier release served the standard queue ``x_fifo`` as the topic ``x_fifo``: such a
    queue keeps its topic, messages and group, and the FIFO queue ``x.fifo`` cannot be
    created beside it (SQS: one name, one queue)."""
    from cirrusmq_broker import limits
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.settings import Settings

    name = f"{queue_name}_fifo"
    broker = Broker(Settings.from_env())
    # the layout an earlier release stored: topic and group named after the queue itself
    broker.admin.create_topic(name, queues=limits.DEFAULT_QUEUES, message_type="NORMAL")
    broker.sqs_queues.put(f"sqs-{name}", {"CreatedTimestamp": "1700000000"})
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    assert sqs.list_queues(QueueNamePrefix=queue_name)["QueueUrls"] == [url]
    assert sqs.create_queue(QueueName=name)["QueueUrl"] == url
    sqs.send_message(QueueUrl=url, MessageBody="kept")
    (message,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert message["Body"] == "kept"
    assert broker.catalog.active(name).name == name
    assert [t.name for t in broker.admin.list_topics() if t.name.startswith(name)] == [name]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    with pytest.raises(ClientError) as refused:
        sqs.create_queue(QueueName=f"{queue_name}.fifo", Attributes={"FifoQueue": "true"})
    assert error_code(refused.value) == "QueueAlreadyExists"
    sqs.delete_queue(QueueUrl=url)
    assert sqs.list_queues(QueueNamePrefix=queue_name).get("QueueUrls", []) == []
