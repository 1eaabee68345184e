"""Producer against the local stack, through real HTTP."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from cirrusmq import BadRequestError, Message, NotFoundError, Producer
from cirrusmq.transport import Transport

from ..helpers import drain
from .conftest import RequestCounter


def test_send_returns_where_the_message_is_stored(endpoint, credentials, admin, topic):
    with Producer(endpoint, credentials) as producer:
        receipt = producer.send(
            Message(
                topic, b"hello", tag="TagA", keys=["k1"], properties={"p": "v"}, message_group="g1"
            )
        )
    assert not receipt.pending and receipt.topic == topic
    stored = admin.get_message(topic, receipt.message_id)
    assert (stored.queue, stored.offset) == (receipt.queue, receipt.offset)
    assert (
        stored.body,
        stored.tag,
        stored.keys,
        dict(stored.properties),
        stored.message_group,
    ) == (b"hello", "TagA", ("k1",), {"p": "v"}, "g1")
    assert stored.born_timestamp <= stored.stored_timestamp


def test_many_sends_make_few_requests(endpoint, credentials, admin, topic):
    counter = RequestCounter()
    transport = Transport(endpoint, credentials, event_hooks=counter.hooks)
    with Producer(endpoint, credentials, transport=transport, max_batch_messages=500) as producer:
        futures = [producer.send_async(Message(topic, f"m{i}")) for i in range(2000)]
        producer.flush()
        receipts = [f.result() for f in futures]
        batch = producer.send_batch([Message(topic, f"b{i}") for i in range(300)])
    transport.close()
    assert counter.sends(topic) <= 12, counter.counts  # 2000 / 500 = 4 at best, + send_batch
    assert len({(r.queue, r.offset) for r in receipts + batch}) == 2300
    assert admin.describe_topic(topic).message_count == 2300


def test_message_groups_keep_their_order(endpoint, credentials, topic, group):
    with Producer(endpoint, credentials, max_batch_messages=50) as producer:
        for i in range(600):
            producer.send_async(
                Message(topic, json.dumps([f"g{i % 4}", i]), message_group=f"g{i % 4}")
            )
    received = drain(endpoint, credentials, group, topic, expected=600)
    assert len(received) == 600
    by_group = defaultdict(list)
    for m in sorted(received, key=lambda m: (m.queue, m.offset)):
        name, i = json.loads(m.body)
        assert m.message_group == name
        by_group[name].append(i)
    assert all(seq == sorted(seq) and len(seq) == 150 for seq in by_group.values())


def test_a_lost_response_is_retried_without_storing_twice(
    endpoint, credentials, admin, topic, proxy
):
    with Producer(proxy.url, credentials) as producer:
        # the first send also sets the producer's signing clock to the stack's (an earlier
        # test's advance_time may have moved it ahead: one 401 RequestExpired, storing nothing)
        receipt = producer.send(Message(topic, b"once"))
        proxy.drop_responses(2, b"POST /v1/topics/")
        futures = [producer.send_async(Message(topic, f"m{i}")) for i in range(99)]
        assert len({f.result().message_id for f in futures}) == 99
    sends = [
        e
        for e in proxy.exchanges
        if e.request.startswith(b"POST /v1/topics/") and b" 401 " not in e.response[:20]
    ]
    assert sum(e.dropped for e in sends) == 2
    attempts = defaultdict(list)  # request body (with producer id + sequence) -> its exchanges
    for exchange in sends:
        attempts[exchange.request.partition(b"\r\n\r\n")[2]].append(exchange)
    retried = [tries for tries in attempts.values() if len(tries) > 1]
    assert retried and all(tries[-1].dropped is False for tries in retried)
    for tries in retried:  # the first attempt stored it; the retries were recognised
        assert b'"duplicate":false' in tries[0].response
        assert all(b'"duplicate":true' in t.response for t in tries[1:])
    assert admin.describe_topic(topic).message_count == 100
    assert admin.get_message(topic, receipt.message_id).body == b"once"


def test_refusals_are_typed_errors(endpoint, credentials, make_topic):
    fifo = make_topic("fifo", message_type="FIFO")
    with Producer(endpoint, credentials) as producer:
        with pytest.raises(NotFoundError) as missing:
            producer.send(Message("no-such-topic-here", b"x"))
        assert missing.value.code == "TopicNotFound" and missing.value.http_status == 404
        with pytest.raises(BadRequestError) as no_group:
            producer.send(Message(fifo, b"x"))
        assert no_group.value.code == "MessageGroupRequired" and not no_group.value.retriable
        assert producer.send(Message(fifo, b"x", message_group="g")).offset == 0
