"""mq-http-sdk's transactional producer on CirrusMQ's transactions: half messages committed,
rolled back, and back-checked through ``consume_half_message``."""

from __future__ import annotations

import time

import pytest
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage

from .conftest import unique
from .mqhttp_helpers import consume_all

INSTANCE = "MQ_INST_local"


def _half(body: str, immunity_seconds: int = 10) -> TopicMessage:
    message = TopicMessage(body, "Txn")
    message.set_message_key(f"key-{body}")
    message.set_trans_check_immunity_time(immunity_seconds)
    return message


def test_a_committed_half_message_is_delivered_and_a_rolled_back_one_never(
    client, make_topic
) -> None:
    topic = make_topic(message_type="TRANSACTION")
    producer = client.get_trans_producer(INSTANCE, topic, "GID_producer")
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    kept = producer.publish_message(_half("kept"))
    dropped = producer.publish_message(_half("dropped"))
    assert kept.receipt_handle and dropped.receipt_handle
    assert consume_all(consumer, 1, wait_seconds=0) == []  # half messages are invisible

    producer.commit(kept.receipt_handle)
    producer.rollback(dropped.receipt_handle)
    got = consume_all(consumer, 2)
    assert [(m.message_id, m.message_body, m.get_message_key()) for m in got] == [
        (kept.message_id, "kept", "key-kept")
    ]
    assert got[0].get_trans_check_immunity_time() == 10
    with pytest.raises(MQExceptionBase):  # a rolled back transaction is not committed later
        producer.commit(dropped.receipt_handle)


def test_an_undecided_half_message_is_back_checked_and_committed_with_the_check_handle(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic(message_type="TRANSACTION")
    producer = client.get_trans_producer(INSTANCE, topic, "GID_producer")
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    sent = producer.publish_message(_half("checked", immunity_seconds=5))
    with pytest.raises(MQExceptionBase) as nothing_due:
        producer.consume_half_message(1, 0)
    assert nothing_due.value.type == "MessageNotExist"

    cirrusmq_stack.advance_time(6)
    cirrusmq_stack.run_schedule("TxnCheckerFunction", "CheckTransactions")
    [check] = producer.consume_half_message(1, 1)
    assert (check.message_id, check.message_body) == (sent.message_id, "checked")
    producer.commit(check.receipt_handle)
    [got] = consume_all(consumer, 1)
    assert got.message_id == sent.message_id


def test_a_back_check_answered_with_rollback_discards_the_message(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic(message_type="TRANSACTION")
    producer = client.get_trans_producer(INSTANCE, topic, "GID_producer")
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    producer.publish_message(_half("undone", immunity_seconds=5))
    cirrusmq_stack.advance_time(6)
    cirrusmq_stack.run_schedule("TxnCheckerFunction", "CheckTransactions")
    [check] = producer.consume_half_message(1, 1)
    producer.rollback(check.receipt_handle)
    assert consume_all(consumer, 1, wait_seconds=0) == []


def _items_of_group(stack, producer_group: str) -> list[dict]:
    ddb = stack.boto3_client("dynamodb")
    return ddb.query(
        TableName=stack.resources["TransactionsTable"],
        KeyConditionExpression="producer_group = :g",
        ExpressionAttributeValues={":g": {"S": producer_group}},
    )["Items"]


@pytest.mark.parametrize("message_type", ["TRANSACTION", "NORMAL"])
def test_a_refused_half_message_stores_no_producer(
    cirrusmq_stack, client, make_topic, message_type: str
) -> None:
    topic = make_topic(message_type=message_type)
    producer = client.get_trans_producer(INSTANCE, topic, "GID_producer")
    message = _half("refused")
    if message_type == "TRANSACTION":  # a transactional message cannot be delayed
        message.set_start_deliver_time(int(time.time() * 1000) + 60_000)
    with pytest.raises(MQExceptionBase) as refused:
        producer.publish_message(message)
    assert refused.value.type not in ("InternalError", "")
    assert _items_of_group(cirrusmq_stack, f"MQHTTP-{topic}") == []


@pytest.mark.parametrize("message_type", ["NORMAL", None])
def test_a_back_check_poll_of_a_topic_without_transactions_stores_no_producer(
    cirrusmq_stack, client, make_topic, message_type: str | None
) -> None:
    topic = make_topic(message_type=message_type) if message_type else unique("nope")
    poller = client.get_trans_producer(INSTANCE, topic, "GID_producer")
    with pytest.raises(MQExceptionBase) as refused:
        poller.consume_half_message(1, 0)
    assert refused.value.type not in ("InternalError", "")
    assert _items_of_group(cirrusmq_stack, f"MQHTTP-{topic}") == []
