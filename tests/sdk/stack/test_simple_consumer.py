"""SimpleConsumer against the local stack."""

from __future__ import annotations

import time

import pytest
from cirrusmq import (
    AckStatus,
    BadRequestError,
    ClientClosedError,
    FilterExpression,
    Message,
    Producer,
    ReceiptHandleExpiredError,
    SimpleConsumer,
)

from ..helpers import wait_until


def send(endpoint, credentials, messages):
    with Producer(endpoint, credentials) as producer:
        return producer.send_batch(messages)


def test_receive_and_ack(endpoint, credentials, admin, topic, group):
    receipts = send(
        endpoint,
        credentials,
        [
            Message(topic, f"m{i}", tag="TagA", keys=[f"k{i}"], properties={"i": str(i)})
            for i in range(5)
        ],
    )
    with SimpleConsumer(endpoint, credentials, group, {topic: FilterExpression.ALL}, 2) as c:
        first = c.receive(3, 30)
        rest = c.receive(10, 30)
        messages = first + rest
        assert len(first) == 3 and len(rest) == 2
        assert {m.message_id for m in messages} == {r.message_id for r in receipts}
        m = next(m for m in messages if m.message_id == receipts[0].message_id)
        assert (m.text, m.tag, m.keys, dict(m.properties)) == ("m0", "TagA", ("k0",), {"i": "0"})
        assert m.delivery_attempt == 1 and m.invisible_until > time.time() * 1000
        assert admin.describe_group(group, topic).inflight == 5
        c.ack(messages[0])
        c.ack_batch(messages[1:])
        assert c.receive(10, 30) == []  # long poll: nothing more comes
    described = admin.describe_group(group, topic)
    assert (described.inflight, described.lag) == (0, 0)
    with pytest.raises(ClientClosedError):
        c.receive()


def test_filters_and_subscriptions(endpoint, credentials, make_topic, group):
    orders, audit = make_topic("orders"), make_topic("audit")
    send(
        endpoint,
        credentials,
        [
            Message(orders, "a", tag="A"),
            Message(orders, "b", tag="B"),
            Message(orders, "c", tag="C"),
            Message(audit, "x"),
        ],
    )
    with SimpleConsumer(endpoint, credentials, group, {orders: "A || C"}, await_duration=1) as c:
        assert sorted(m.text for m in c.receive(10)) == ["a", "c"]
        c.subscribe(audit)
        assert c.subscriptions == {orders: FilterExpression("A || C"), audit: FilterExpression()}
        got = c.receive(10)
        assert [m.text for m in got] == ["x"]
        c.unsubscribe(audit)
        c.unsubscribe(orders)
        with pytest.raises(ValueError, match="no subscriptions"):
            c.receive(10)


def test_long_poll_returns_when_a_message_arrives(endpoint, credentials, topic, group):
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=10) as c:
        import threading

        threading.Timer(0.5, lambda: send(endpoint, credentials, [Message(topic, "late")])).start()
        got = c.receive(1)
        assert [m.text for m in got] == ["late"]


def test_change_invisible_duration_gives_a_new_handle(endpoint, credentials, topic, group):
    send(endpoint, credentials, [Message(topic, "x")])
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=1) as c:
        (m,) = c.receive(1, 10)
        later = c.change_invisible_duration(m, 300)
        assert later.receipt_handle != m.receipt_handle
        assert later.invisible_until >= m.invisible_until + 250_000
        c.ack(m)  # the old handle still acks
        c.ack(later)  # and acking again is fine


def test_bad_arguments_are_refused(endpoint, credentials, topic, group):
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=0) as c:
        with pytest.raises(BadRequestError) as too_short:
            c.receive(1, invisible_duration=1)
        assert too_short.value.code == "InvalidDuration"
        with pytest.raises(BadRequestError) as forged:
            c.ack("forged-handle")
        assert forged.value.code == "InvalidReceiptHandle"


@pytest.mark.slow
def test_unacked_messages_come_back_and_stale_acks_are_reported(
    endpoint, credentials, admin, topic, group
):
    send(endpoint, credentials, [Message(topic, "a"), Message(topic, "b")])
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=0) as c:
        first = c.receive(2, 10)
        assert len(first) == 2 and c.receive(2, 10) == []
        # expired after 10 s, then back from the retry topic after its 10 s backoff
        again = wait_until(lambda: c.receive(2, 10), timeout_s=40, step_s=0.5)
        assert {m.delivery_attempt for m in again} == {2}
        old_a = next(m for m in first if m.text == "a")
        new_b = next(m for m in again if m.text == "b")
        stale, acked = c.ack_batch([old_a, new_b])  # the stale handle does not stop the other
        assert (stale.status, stale.code) == (AckStatus.EXPIRED, "ReceiptHandleExpired")
        assert stale.message_id == old_a.message_id and acked.acked
        with pytest.raises(ReceiptHandleExpiredError) as single:
            c.ack(old_a)  # a single ack raises the typed error
        assert single.value.receipt_handles == [old_a.receipt_handle]
        c.ack(next(m for m in again if m.text == "a"))
    assert admin.describe_group(group, topic).inflight == 0


def test_acks_wait_in_the_outbox_while_the_service_is_down(
    endpoint, credentials, admin, topic, group, proxy, tmp_path
):
    send(endpoint, credentials, [Message(topic, f"m{i}") for i in range(3)])
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=1) as c:
        received = c.receive(3, 60)
    assert len(received) == 3
    proxy.down()
    outbox = tmp_path / "acks.db"
    with SimpleConsumer(
        proxy.url, credentials, group, [topic], outbox_path=outbox, max_attempts=1
    ) as offline:
        offline.ack_batch(received)  # no error: kept for later
        assert offline.pending_acks == 3
        proxy.up()
        offline._retrier.retry_now()
        wait_until(lambda: offline.pending_acks == 0, timeout_s=10)
    assert admin.describe_group(group, topic).inflight == 0


def test_receive_and_ack_acks_then_receives_in_one_request(
    endpoint, credentials, admin, topic, group
):
    send(endpoint, credentials, [Message(topic, f"m{i}") for i in range(4)])
    with SimpleConsumer(endpoint, credentials, group, [topic], 1) as c:
        first = c.receive(2, 30)
        results, second = c.receive_and_ack([*first, "forged.handle"], 2, 30)
        assert [r.status for r in results] == [
            AckStatus.ACKED,
            AckStatus.ACKED,
            AckStatus.INVALID,
        ]
        assert [r.message_id for r in results[:2]] == [m.message_id for m in first]
        assert c.acks_ride  # the service took them on the receive
        assert {m.text for m in first + second} == {f"m{i}" for i in range(4)}
        results, rest = c.receive_and_ack(second, 2, 30)
        assert all(r.acked for r in results) and rest == []
    assert admin.describe_group(group, topic).lag == 0
