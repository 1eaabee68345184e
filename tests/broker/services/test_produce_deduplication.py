"""A send deduplicated for a time (SQS FIFO's deduplication interval): a repeat of its
stamp within that time of the first accepted send stores nothing and answers that send;
a later one is a new message that takes the stamp over. It costs what a plain send costs."""

from __future__ import annotations

from collections import Counter

import pytest
from broker_helpers import count_calls, index_items
from cirrusmq_broker.errors import InvalidMessage
from cirrusmq_broker.model import MessageInput, ProducerStamp

WINDOW_MS = 300_000
STAMP = ProducerStamp("sqs-dedup.k", 0, "sqs")


def _send(broker, body: bytes, message_id: str):
    message = MessageInput(body, message_id=message_id, message_group="g")
    return broker.produce.send("f", [message], STAMP, deduplication_ms=WINDOW_MS)


@pytest.fixture
def fifo(broker):
    broker.admin.create_topic("f", queues=4, message_type="FIFO")
    return broker


def test_a_repeat_within_the_window_answers_the_first_send(fifo, clock):
    first = _send(fifo, b"a", "id-1")
    clock.advance(WINDOW_MS / 1000 - 1)
    again = _send(fifo, b"other body", "id-2")
    assert again.duplicate and not first.duplicate
    assert again.receipts == first.receipts
    assert again.receipts[0].message_id == "id-1"
    assert len(index_items(fifo)) == 1


def test_a_repeat_after_the_window_is_a_new_message_and_holds_the_stamp(fifo, clock):
    first = _send(fifo, b"a", "id-1")
    clock.advance(WINDOW_MS / 1000)
    second = _send(fifo, b"a", "id-2")
    assert not second.duplicate
    assert second.receipts[0].message_id == "id-2"
    assert second.receipts[0].offset == first.receipts[0].offset + 1
    clock.advance(WINDOW_MS / 1000 - 1)
    third = _send(fifo, b"a", "id-3")
    assert third.duplicate and third.receipts == second.receipts
    assert len(index_items(fifo)) == 2


def test_a_deduplicated_send_costs_what_a_plain_send_costs(fifo):
    _send(fifo, b"warm", "id-0")  # the head is read once per container
    calls, remove = count_calls()
    try:
        fifo.produce.send(
            "f",
            [MessageInput(b"x", message_id="id-x", message_group="g")],
            ProducerStamp("sqs-dedup.other", 0, "sqs"),
            deduplication_ms=WINDOW_MS,
        )
    finally:
        remove()
    assert calls == Counter({"s3.PutObject": 1, "dynamodb.TransactWriteItems": 1})


def test_a_deduplicated_send_holds_one_message(fifo):
    messages = [MessageInput(b"a", message_group="g"), MessageInput(b"b", message_group="g")]
    with pytest.raises(InvalidMessage):
        fifo.produce.send("f", messages, STAMP, deduplication_ms=WINDOW_MS)
    assert index_items(fifo) == []
