"""mq-http-sdk's transactional producer on CirrusMQ's transactions: half messages committed,
rolled back, and back-checked through ``consume_half_message``."""

from __future__ import annotations

import re
import time
from urllib.parse import urlsplit

import pytest
from mq_http_sdk.mq_client import MQClient
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage
from sdk.stack.proxy import TcpProxy

from .conftest import unique
from .mqhttp_helpers import check_once, consume_all, mq_client

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
    check_once(cirrusmq_stack)
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
    check_once(cirrusmq_stack)
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


def _published(response: bytes) -> tuple[str, str]:
    """(MessageId, ReceiptHandle) of a publish answer as it went over the wire."""
    found = [
        re.search(rb"<%s>([^<]*)</%s>" % (name, name), response)
        for name in (b"MessageId", b"ReceiptHandle")
    ]
    assert all(found), response
    return found[0].group(1).decode(), found[1].group(1).decode()  # type: ignore[union-attr]


def test_a_half_message_publish_resent_after_a_lost_answer_opens_one_transaction(
    cirrusmq_stack, make_topic
) -> None:
    topic = make_topic(message_type="TRANSACTION")
    gateway = urlsplit(cirrusmq_stack.endpoint)
    consumer = mq_client(cirrusmq_stack).get_consumer(INSTANCE, topic, unique("GID"))
    with TcpProxy(gateway.hostname or "127.0.0.1", gateway.port or 80) as proxy:
        credentials = cirrusmq_stack.credentials
        client = MQClient(proxy.url, credentials.access_key, credentials.secret_key)
        producer = client.get_trans_producer(INSTANCE, topic, "GID_producer")
        proxy.drop_responses(1, b"POST ")
        sent = producer.publish_message(_half("once", immunity_seconds=5))
        posts = [e for e in proxy.exchanges if e.request.startswith(b"POST ")]
        # the service handled the publish, its answer was lost, the client sent it again
        assert [e.dropped for e in posts] == [True, False]
        assert posts[0].request == posts[1].request
        assert _published(posts[0].response) == (sent.message_id, sent.receipt_handle)
        client.close_connection()

    transactions = [
        i
        for i in _items_of_group(cirrusmq_stack, f"MQHTTP-{topic}")
        if i["item_key"]["S"].startswith("txn#")
    ]
    assert len(transactions) == 1
    cirrusmq_stack.advance_time(6)
    check_once(cirrusmq_stack)
    poller = mq_client(cirrusmq_stack).get_trans_producer(INSTANCE, topic, "GID_producer")
    checks = poller.consume_half_message(16, 1)
    assert [c.message_id for c in checks] == [sent.message_id]
    poller.commit(checks[0].receipt_handle)
    got = consume_all(consumer, 2)
    assert [(m.message_id, m.message_body) for m in got] == [(sent.message_id, "once")]
