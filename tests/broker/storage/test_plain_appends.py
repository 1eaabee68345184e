"""Appends in plain conditional writes (claim, index item, head): a death between any two
of them, a resend, a race for the offset, a topic deleted, a tail cached across
retention. Each case stores every message once and shows it to readers once."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import boto3
import pytest
from broker_helpers import Crash, count_calls, index_items, resent_put, send
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


def test_a_send_to_several_queues_is_one_transaction_visible_all_at_once(broker):
    broker.admin.create_topic("t", queues=4)
    inputs = [MessageInput(b"%d" % i, message_group=f"g{i}") for i in range(8)]
    calls, remove = count_calls()
    try:
        receipts = broker.produce.send("t", inputs, ProducerStamp("p", 1)).receipts
    finally:
        remove()
    assert len({r.queue for r in receipts}) > 1
    assert calls["dynamodb.TransactWriteItems"] == 1 and calls["dynamodb.PutItem"] == 0


# The resend's first calls: its claim's put (refused: the claim is there), the head read,
# the index item's put. The other attempt runs to its end right before one of them.
RESEND_POINTS = [("GetItem", 0), ("PutItem", 1)]


@pytest.mark.parametrize(("operation", "nth"), RESEND_POINTS)
def test_two_resends_of_a_claim_store_the_batch_once(warm, settings, clock, operation, nth):
    stamp, inputs = ProducerStamp("p", 1), [MessageInput(b"a")]
    with before_call(warm, "PutItem", 1, die), pytest.raises(Crash):  # claim put, item not
        warm.produce.send("t", inputs, stamp)
    second = Broker(settings, clock)
    done = []

    def first_resend() -> None:
        done.append(Broker(settings, clock).produce.send("t", inputs, stamp))

    with before_call(second, operation, nth, first_resend):
        again = second.produce.send("t", inputs, stamp)
    assert done and again.receipts == done[0].receipts
    assert bodies(warm) == [b"a"]


@pytest.mark.parametrize(("operation", "nth"), RESEND_POINTS)
def test_a_slow_original_and_its_resend_store_the_batch_once(warm, settings, clock, operation, nth):
    """The original pauses after its claim (a client timed out and resent); it finishes
    while the resend is at one of its calls."""
    stamp, inputs = ProducerStamp("p", 1), [MessageInput(b"a")]
    go, done, claimed = threading.Event(), threading.Event(), threading.Event()
    out: dict = {}

    def original() -> None:
        try:
            with before_call(warm, "PutItem", 1, lambda: (claimed.set(), go.wait(10))):
                out["first"] = warm.produce.send("t", inputs, stamp)
        finally:
            done.set()

    thread = threading.Thread(target=original)
    thread.start()
    assert claimed.wait(10)
    resend = Broker(settings, clock)
    with before_call(resend, operation, nth, lambda: (go.set(), done.wait(10))):
        again = resend.produce.send("t", inputs, stamp)
    thread.join(10)
    assert out["first"].receipts == again.receipts
    assert bodies(warm) == [b"a"]


def test_a_resend_after_retention_stores_nothing_again(warm, settings, clock):
    """Its item expired: the record still answers (ours may have been there)."""
    stamp, inputs = ProducerStamp("p", 1), [MessageInput(b"a")]
    first = warm.produce.send("t", inputs, stamp)
    assert bodies(warm) == [b"a"]
    clock.advance(4 * 24 * 3600)  # past retention (72 h), within the 7-day window
    table = boto3.client("dynamodb", region_name="us-east-1")
    for item in index_items(warm):  # what TTL deletes
        key = {"stream": item["stream"], "base_offset": item["base_offset"]}
        table.delete_item(TableName=settings.log_index_table, Key=key)
    again = Broker(settings, clock).produce.send("t", inputs, stamp)
    assert again.duplicate and again.receipts == first.receipts
    assert index_items(warm) == []  # not put again, not even below the head
    assert bodies(warm) == []


def test_a_reader_by_offset_sees_no_item_beyond_the_head(warm, settings, clock):
    """The item of a send refused after its put (its topic deleted) was never published."""
    seen: list[bytes] = []

    def read_then_delete() -> None:
        result = Broker(settings, clock).log_reader.read("t", 0, 0, max_messages=10)
        seen.extend(m.body for m in result.messages)
        Broker(settings, clock).admin.delete_topic("t")

    with before_call(warm, "UpdateItem", 0, read_then_delete), pytest.raises(TopicNotFound):
        send(warm, "t", b"refused")
    assert seen == [b"warm"]


def test_an_index_put_resent_after_its_answer_was_lost_stores_the_batch_once(warm):
    """botocore resends a put whose answer was lost, and the resend's answer says the
    offset is taken: by the item the first put. A send without a producer stamp knows that
    item by its batch object's key, and does not append the batch again further on."""
    with resent_put(warm._dynamodb, warm.settings.log_index_table) as landed:
        sent = warm.produce.send("t", [MessageInput(b"a"), MessageInput(b"b")])
    assert landed and [r.offset for r in sent.receipts] == [1, 2]
    assert len(index_items(warm)) == 2
    assert bodies(warm) == [b"a", b"b"]
