"""Appends in plain conditional writes (claim, index item, head): a death between any two
of them, a resend, a race for the offset, a topic deleted, a tail cached across
retention. Each case stores every message once and shows it to readers once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import boto3
import pytest
from broker_helpers import Crash, index_items, send
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import IdempotencyConflict, TopicNotFound
from cirrusmq_broker.model import MessageInput, ProducerStamp
from cirrusmq_broker.storage.appends import TAIL_TRUSTED_MS


@contextmanager
def before_call(
    broker: Broker, operation: str, nth: int, action: Callable[[], None]
) -> Iterator[None]:
    """Run ``action`` right before the ``nth`` (0-based) ``operation`` call of ``broker``'s
    DynamoDB client, once (``action`` may raise Crash: the process dies there)."""
    seen: list[int] = []

    def hook(**_: object) -> None:
        seen.append(1)
        if len(seen) == nth + 1:
            action()

    event = f"before-call.dynamodb.{operation}"
    broker._dynamodb.meta.events.register(event, hook)
    try:
        yield
    finally:
        broker._dynamodb.meta.events.unregister(event, hook)


def die() -> None:
    raise Crash()


def bodies(broker: Broker, group: str = "g", topic: str = "t") -> list[bytes]:
    return [d.message.body for d in broker.consume.receive(group, topic, max_messages=32)]


@pytest.fixture
def warm(broker: Broker) -> Broker:
    """A 1-queue topic whose tail this container has cached."""
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"warm")
    assert bodies(broker) == [b"warm"]
    return broker


def test_a_resend_finishes_an_append_that_died_after_its_claim(warm, settings, clock):
    stamp, inputs = ProducerStamp("p", 1), [MessageInput(b"a"), MessageInput(b"b")]
    with before_call(warm, "PutItem", 1, die), pytest.raises(Crash):  # claim put, item not
        warm.produce.send("t", inputs, stamp)
    assert bodies(warm) == []
    send(Broker(settings, clock), "t", b"other")  # takes the offset the claim names
    again = Broker(settings, clock).produce.send("t", inputs, stamp)
    assert [r.offset for r in again.receipts] == [2, 3]
    assert bodies(warm) == [b"other", b"a", b"b"]
    assert warm.produce.send("t", inputs, stamp).receipts == again.receipts
    assert bodies(warm) == []


def test_a_resend_publishes_an_append_that_died_before_its_head_moved(warm, settings, clock):
    stamp, inputs = ProducerStamp("p", 1), [MessageInput(b"a")]
    with before_call(warm, "UpdateItem", 0, die), pytest.raises(Crash):
        warm.produce.send("t", inputs, stamp)
    assert bodies(warm) == []  # put beyond the head: no reader sees it yet
    again = Broker(settings, clock).produce.send("t", inputs, stamp)
    assert again.duplicate and [r.offset for r in again.receipts] == [1]
    assert bodies(warm) == [b"a"]


def test_the_next_append_publishes_an_item_whose_producer_died(warm, settings, clock):
    with before_call(warm, "UpdateItem", 0, die), pytest.raises(Crash):
        send(warm, "t", b"a")
    [receipt] = send(Broker(settings, clock), "t", b"b")  # its tail is read: the head, 1
    assert receipt.offset == 2  # the offset was taken: it walked over the item
    assert bodies(warm) == [b"a", b"b"]


def test_a_paused_original_and_its_resend_store_the_batch_once(warm, settings, clock):
    """The original pauses after its claim; meanwhile another send takes the claimed
    offset and the resend moves the claim and appends. The original then finds its offset
    taken, fails to move the claim (the resend moved it) and finds its batch where the
    claim now points."""
    stamp, inputs = ProducerStamp("p", 1), [MessageInput(b"a")]

    def meanwhile() -> None:
        send(Broker(settings, clock), "t", b"other")
        resent = Broker(settings, clock).produce.send("t", inputs, stamp)
        assert [r.offset for r in resent.receipts] == [2]
        send(Broker(settings, clock), "t", b"later")

    with before_call(warm, "PutItem", 1, meanwhile):
        first = warm.produce.send("t", inputs, stamp)
    assert [r.offset for r in first.receipts] == [2]
    assert bodies(warm) == [b"other", b"a", b"later"]


def test_a_resend_with_another_payload_stores_nothing_and_the_first_still_finishes(
    warm, settings, clock
):
    stamp = ProducerStamp("p", 1)
    with before_call(warm, "PutItem", 1, die), pytest.raises(Crash):
        warm.produce.send("t", [MessageInput(b"a")], stamp)
    items = index_items(warm)
    with pytest.raises(IdempotencyConflict):
        Broker(settings, clock).produce.send("t", [MessageInput(b"changed")], stamp)
    assert index_items(warm) == items
    Broker(settings, clock).produce.send("t", [MessageInput(b"a")], stamp)
    assert bodies(warm) == [b"a"]


def test_a_topic_deleted_before_the_head_moved_takes_the_item_back(warm, settings, clock):
    items = index_items(warm)

    def delete() -> None:
        Broker(settings, clock).admin.delete_topic("t")

    with before_call(warm, "UpdateItem", 0, delete), pytest.raises(TopicNotFound):
        warm.produce.send("t", [MessageInput(b"a")], ProducerStamp("p", 1))
    assert index_items(warm) == items


def test_a_cached_tail_is_read_again_before_retention_could_free_its_offset(warm, settings, clock):
    """Another container appends, a consumer reads past it, then retention removes those
    items: this container's cached tail now names a free offset inside the log."""
    other = Broker(settings, clock)
    send(other, "t", b"x", b"y", b"z")
    assert bodies(warm) == [b"x", b"y", b"z"]
    table = boto3.client("dynamodb", region_name="us-east-1")
    for item in table.scan(TableName=settings.log_index_table)["Items"]:
        if int(item["base_offset"]["N"]) > 0:  # what DynamoDB's TTL would delete
            key = {"stream": item["stream"], "base_offset": item["base_offset"]}
            table.delete_item(TableName=settings.log_index_table, Key=key)
    clock.advance(TAIL_TRUSTED_MS // 1000 + 1)
    [receipt] = send(warm, "t", b"late")
    assert receipt.offset == 4
    assert bodies(warm) == [b"late"]
