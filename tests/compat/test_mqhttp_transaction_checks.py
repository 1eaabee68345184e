"""mq-http-sdk's transactional producer on a local stack whose schedules run: an undecided
half message is offered to ``consume_half_message`` once its immunity ends (within about a
second, as delayed messages are released), never before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cirrusmq import Admin
from cirrusmq.testing import LocalStack
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage

from .conftest import unique
from .mqhttp_helpers import consume_all, mq_client

INSTANCE = "MQ_INST_local"


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(schedules=True, expire_interval=None) as running:
        yield running


def _no_check_due(producer) -> None:
    with pytest.raises(MQExceptionBase) as nothing:
        producer.consume_half_message(16, 0)
    assert nothing.value.type == "MessageNotExist"


def test_a_half_message_is_offered_when_its_immunity_ends(stack) -> None:
    topic = unique("txn")
    with Admin(stack.endpoint, stack.credentials) as admin:
        admin.create_topic(topic, message_type="TRANSACTION")
    client = mq_client(stack)
    producer = client.get_trans_producer(INSTANCE, topic, "GID_producer")
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    message = TopicMessage("undecided", "Txn")
    message.set_trans_check_immunity_time(10)
    sent = producer.publish_message(message)

    stack.advance_time(9)
    _no_check_due(producer)  # never before its immunity ends
    stack.advance_time(2)  # a second past it: the checker ran at its end
    [check] = producer.consume_half_message(16, 1)
    assert (check.message_id, check.message_body) == (sent.message_id, "undecided")
    producer.commit(check.receipt_handle)
    [got] = consume_all(consumer, 1)
    assert got.message_id == sent.message_id
    client.close_connection()
