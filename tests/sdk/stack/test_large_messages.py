"""Messages above the inline limit through the local stack: the producer uploads the body
to S3 with presigned URLs, the consumer streams it back; retries, dead letters, redrive and
transactions move only the pointer; bad pointers are refused with nothing stored."""

from __future__ import annotations

import base64
import hashlib
import os
import tracemalloc
from pathlib import Path

import httpx
import pytest
from cirrusmq import (
    Message,
    PayloadTooLargeError,
    Producer,
    SimpleConsumer,
    TransactionProducer,
)
from cirrusmq.errors import InvalidLargeBodyError, LargeBodyError
from cirrusmq.signing import CirrusAuth
from cirrusmq_broker import clock

from .conftest import unique

MIB = 1024 * 1024


def body_file(tmp_path: Path, size: int) -> tuple[Path, str]:
    """A file of ``size`` pseudo-random bytes (written 1 MiB at a time) and its SHA-256."""
    path, digest = tmp_path / "body.bin", hashlib.sha256()
    block = os.urandom(MIB)
    with open(path, "wb") as out:
        for offset in range(0, size, MIB):
            chunk = block[: min(MIB, size - offset)]
            digest.update(chunk)
            out.write(chunk)
    return path, digest.hexdigest()


def receive_one(endpoint, credentials, group: str, topic: str):
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=2) as consumer:
        (message,) = consumer.receive(1, 60)
        consumer.ack(message)
    return message


def warm_up(endpoint, credentials, topic: str) -> None:
    """One large message there and back, so that the in-process handlers' first imports
    and caches are not counted as the SDK's memory."""
    with Producer(endpoint, credentials, large_body_threshold_bytes=0) as producer:
        producer.send(Message(topic, b"warm-up"))
    assert receive_one(endpoint, credentials, unique("g"), topic).body == b"warm-up"


def test_a_50_mb_body_round_trips_streamed_in_bounded_memory(
    endpoint, credentials, make_topic, topic, tmp_path
):
    size = 50 * MIB + 123
    path, sha256 = body_file(tmp_path, size)
    warm_up(endpoint, credentials, make_topic())
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    try:
        with Producer(endpoint, credentials) as producer:
            receipt = producer.send(Message(topic, path, tag="big"))
        message = receive_one(endpoint, credentials, unique("g"), topic)
        digest, read = hashlib.sha256(), 0
        with message.body_stream() as stream:
            for chunk in stream:
                digest.update(chunk)
                read += len(chunk)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert message.message_id == receipt.message_id and message.tag == "big"
    assert (read, digest.hexdigest()) == (size, sha256)
    assert message.large_body is not None and message.body_size == size
    assert message.properties["ExtendedPayloadSize"] == str(size)
    assert peak < 16 * MIB  # a bound, not a timing: the body never sits in memory whole


def test_a_body_above_4_mib_given_as_bytes_is_offloaded_and_body_loads_it(
    endpoint, credentials, topic
):
    data = os.urandom(5 * MIB)
    with Producer(endpoint, credentials) as producer:
        producer.send(Message(topic, data))
        producer.send(Message(topic, b"small"))
    with SimpleConsumer(endpoint, credentials, unique("g"), [topic], await_duration=2) as c:
        messages = c.receive(10, 60)
    by_size = {m.body_size: m for m in messages}
    assert by_size[5 * MIB].body == data and by_size[5 * MIB].large_body is not None
    assert by_size[5].body == b"small" and by_size[5].large_body is None


def test_a_large_message_survives_a_retry_a_dead_letter_and_a_redrive(
    cirrusmq_stack, endpoint, credentials, admin, topic
):
    data, group = os.urandom(5 * MIB), unique("g")
    with Producer(endpoint, credentials) as producer:
        producer.send(Message(topic, data))
    admin.update_group(group, max_delivery_attempts=2)
    with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=2) as consumer:
        (first,) = consumer.receive(1, 60)
        assert consumer.nack(first).acked
        cirrusmq_stack.advance_time(11)  # the first backoff level (10 s)
        (second,) = consumer.receive(1, 60)
        assert second.delivery_attempt == 2 and second.body == data  # from the retry topic
        assert consumer.nack(second).acked  # the last attempt: a dead letter
    (dead,) = admin.list_dead_letters(group, topic).dead_letters
    assert dead.message_id == first.message_id
    assert admin.redrive_dead_letters(group, topic).redriven == 1
    again = receive_one(endpoint, credentials, group, topic)
    assert again.message_id == first.message_id and again.body == data


def test_a_transaction_commits_a_large_message(endpoint, credentials, make_topic):
    topic = make_topic("pay", message_type="TRANSACTION", queues=1)
    data = os.urandom(5 * MIB)
    group = unique("pg")
    with (
        TransactionProducer(endpoint, credentials, producer_group=group) as producer,
        producer.begin_transaction() as tx,
    ):
        tx.send(Message(topic, data))
    assert receive_one(endpoint, credentials, unique("g"), topic).body == data


def test_a_body_above_2_gib_is_refused_before_anything_is_sent(
    endpoint, credentials, admin, topic, tmp_path
):
    huge = tmp_path / "huge.bin"
    with open(huge, "wb") as out:
        out.truncate(2 * 1024 * MIB + 1)  # sparse: nothing is written
    with Producer(endpoint, credentials) as producer, pytest.raises(PayloadTooLargeError):
        producer.send(Message(topic, huge))
    assert sum(q.max_offset for q in admin.topic_offsets(topic)) == 0


def stack_auth(credentials) -> CirrusAuth:
    """Signs on the broker clock, which other tests of this process's stack may have moved on."""
    auth = CirrusAuth(credentials)
    auth.clock_offset_s = clock.offset_ms() / 1000
    return auth


def send_raw(endpoint, credentials, topic: str, message: dict) -> httpx.Response:
    with httpx.Client(base_url=endpoint, auth=stack_auth(credentials)) as client:
        return client.post(f"/v1/topics/{topic}/messages", json={"messages": [message]})


def grant(endpoint, credentials, topic: str, size: int) -> httpx.Response:
    with httpx.Client(base_url=endpoint, auth=stack_auth(credentials)) as client:
        return client.post(f"/v1/topics/{topic}/large-bodies", json={"size": size})


def test_bad_pointers_are_refused_with_a_clear_4xx_and_nothing_stored(
    endpoint, credentials, admin, make_topic
):
    topic, other = make_topic(), make_topic()
    key = grant(endpoint, credentials, other, 10).json()["key"]  # never uploaded
    sha = hashlib.sha256(b"x").hexdigest()
    cases = [
        {"key": key, "size": 10, "sha256": sha},  # another topic's body
        {"key": key.replace(f"topic={other}", f"topic={topic}"), "size": 10, "sha256": sha},
        {"key": "topics/elsewhere/object", "size": 10, "sha256": sha},  # a foreign object
    ]
    for pointer in cases:
        response = send_raw(endpoint, credentials, topic, {"large_body": pointer})
        assert (response.status_code, response.json()["code"]) == (400, "InvalidLargeBody")
    too_big = grant(endpoint, credentials, topic, 2 * 1024 * MIB + 1)
    assert (too_big.status_code, too_big.json()["code"]) == (413, "MessageTooLarge")
    forged = send_raw(
        endpoint,
        credentials,
        topic,
        {"body": base64.b64encode(b"x").decode(), "properties": {"cirrusmq.body.key": key}},
    )
    assert (forged.status_code, forged.json()["code"]) == (400, "InvalidMessage")
    assert sum(q.max_offset for q in admin.topic_offsets(topic)) == 0


def test_a_size_mismatch_is_refused(endpoint, credentials, admin, topic):
    with Producer(endpoint, credentials) as producer:
        uploaded = producer._offloaded(Message(topic, os.urandom(5 * MIB))).large_body
    assert uploaded is not None
    lie = {"key": uploaded.key, "size": uploaded.size + 1, "sha256": uploaded.sha256}
    response = send_raw(endpoint, credentials, topic, {"large_body": lie})
    assert (response.status_code, response.json()["code"]) == (400, "InvalidLargeBody")
    with Producer(endpoint, credentials) as producer, pytest.raises(InvalidLargeBodyError):
        producer.send(Message(topic, b"", large_body=type(uploaded)(uploaded.key, 7, "0" * 64)))
    assert sum(q.max_offset for q in admin.topic_offsets(topic)) == 0


def test_a_body_that_does_not_match_its_hash_raises_while_it_is_read(endpoint, credentials, topic):
    data = os.urandom(5 * MIB)
    with Producer(endpoint, credentials) as producer:
        uploaded = producer._offloaded(Message(topic, data)).large_body
        assert uploaded is not None
        wrong = type(uploaded)(uploaded.key, uploaded.size, hashlib.sha256(b"other").hexdigest())
        producer.send(Message(topic, b"", large_body=wrong))
    message = receive_one(endpoint, credentials, unique("g"), topic)
    with pytest.raises(LargeBodyError) as raised, message.body_stream() as stream:
        stream.read()
    assert raised.value.code == "LargeBodyMismatch"


def test_an_async_producer_offloads_a_large_body(endpoint, credentials, topic):
    import asyncio

    from cirrusmq import AsyncProducer

    data = os.urandom(5 * MIB)

    async def produce() -> str:
        async with AsyncProducer(endpoint, credentials) as producer:
            return (await producer.send(Message(topic, data))).message_id

    message_id = asyncio.run(produce())
    message = receive_one(endpoint, credentials, unique("g"), topic)
    assert message.message_id == message_id and message.body == data


def test_a_pointer_with_a_size_int_cannot_parse_is_an_inline_body_not_a_crashed_receive(
    endpoint, credentials, topic
):
    """``"²".isdigit()`` is True but ``int("²")`` raises: one such message (any producer
    may send it) made every receive of the topic raise ValueError, so no consumer could
    get past it. It reads as an inline body."""
    pointer = (
        b'["software.amazon.payloadoffloading.PayloadS3Pointer",{"s3BucketName":"b","s3Key":"k"}]'
    )
    with Producer(endpoint, credentials) as producer:
        producer.send(Message(topic, pointer, properties={"ExtendedPayloadSize": "\u00b2"}))
    message = receive_one(endpoint, credentials, unique("g"), topic)
    assert (message.large_body, message.body) == (None, pointer)
