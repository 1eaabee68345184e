"""A receive response stays within Lambda's 6 MiB response payload, counted in bytes as it is
serialized: the API's JSON (Powertools' serializer escapes non-ASCII text as ``\\uXXXX``,
bodies are base64) inside the Lambda response, whose ``body`` string escapes each quote and
backslash again. The API's own writer (UTF-8 text) takes no more bytes than that."""

from __future__ import annotations

import json

from cirrusmq_api.app import _POWERTOOLS_JSON, write_json
from cirrusmq_api.convert import received_body
from cirrusmq_api.schemas import ReceiveResponse
from cirrusmq_broker import limits
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services.delivery.response_size import RESPONSE_BYTE_BUDGET, wire_size


def lambda_response_bytes(received: list, write=_POWERTOOLS_JSON) -> int:
    """The bytes of the Lambda response the receive route returns for ``received``, its
    answer written by ``write``."""
    model = ReceiveResponse(messages=[received_body(r) for r in received])
    body = write(model.model_dump(mode="json"))
    envelope = {
        "statusCode": 200,
        "body": body,
        "isBase64Encoded": False,
        "headers": {"Content-Type": "application/json"},
        "cookies": [],
    }
    return len(json.dumps(envelope).encode())


WIDE = "\U0001f600"  # outside the BMP: a surrogate pair, 12 bytes escaped, 14 in the envelope


def heavy(i: int) -> MessageInput:
    return MessageInput(
        b"x" * 1000,
        tag=WIDE * limits.MAX_TAG_CHARS,
        keys=[f"{i}-{k}" + WIDE * (limits.MAX_KEY_CHARS - 8) for k in range(limits.MAX_KEYS)],
        properties={
            f"{p:02d}" + "é" * 100: WIDE * limits.MAX_PROPERTY_CHARS
            for p in range(limits.MAX_PROPERTIES)
        },
        message_group="g" + "é" * 100,
    )


def test_a_response_of_non_ascii_properties_fits_the_lambda_payload(broker):
    group, topic = "g" * 127, "t" * 127  # the longest names: the longest receipt handles
    broker.admin.create_topic(topic, queues=1)
    for start in range(0, 12, 3):
        broker.produce.send(topic, [heavy(i) for i in range(start, start + 3)])
    received = broker.consume.receive(group, topic, max_messages=100)
    assert received  # at least one always fits
    size = lambda_response_bytes(received)
    print(f"\n{len(received)} messages: {size} bytes (limit {limits.MAX_REQUEST_BYTES})")
    assert size <= limits.MAX_REQUEST_BYTES
    for one in received:  # the estimate is an upper bound of each message's share
        assert lambda_response_bytes([one]) - lambda_response_bytes([]) <= wire_size(one.message)


def test_plain_ascii_messages_still_fill_a_response(broker):
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"x" * 3000, tag="a") for _ in range(1000)])
    received = broker.consume.receive("g", "t", max_messages=1000)
    assert len(received) == 1000
    assert lambda_response_bytes(received) <= limits.MAX_REQUEST_BYTES


def test_the_estimate_bounds_a_retry_delivery_with_the_longest_names(broker, clock):
    group, topic = "g" * 127, "t" * 127  # its handle names retry.<group>.<topic>
    broker.admin.create_topic(topic, queues=1)
    broker.produce.send(topic, [heavy(0)])
    [first] = broker.consume.receive(group, topic)
    broker.retries.nack(group, [first.receipt_handle])
    clock.advance(10)
    [again] = broker.consume.receive(group, topic)
    assert again.delivery_attempt == 2
    assert lambda_response_bytes([again]) - lambda_response_bytes([]) <= wire_size(again.message)


def test_retry_and_topic_deliveries_share_one_response_budget(broker, clock):
    broker.admin.create_topic("t", queues=1)
    big = b"r" * (3 * 1024 * 1024)  # 4 MiB in base64
    broker.produce.send("t", [MessageInput(big)])
    [first] = broker.consume.receive("g", "t")
    broker.retries.nack("g", [first.receipt_handle])
    clock.advance(10)
    broker.produce.send("t", [MessageInput(big)])
    received = broker.consume.receive("g", "t", max_messages=10)
    assert len(received) == 1  # the retry delivery; the other waits for the next receive
    assert lambda_response_bytes(received) <= limits.MAX_REQUEST_BYTES
    assert len(broker.consume.receive("g", "t", max_messages=10)) == 1


def test_the_first_message_fits_only_beside_what_the_acks_results_take(broker):
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"x" * limits.MAX_BODY_BYTES)])  # its whole share
    reserved = 1024 * 1024  # the results of a receive's riding acks
    received = broker.consume.receive("g", "t", before_receive=lambda: reserved)
    taken = reserved + sum(wire_size(r.message) for r in received)
    assert taken <= RESPONSE_BYTE_BUDGET
    assert len(broker.consume.receive("g", "t")) == 1  # the next receive, without acks


def test_the_api_writes_a_receive_answer_in_no_more_bytes_than_counted(broker):
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [heavy(i) for i in range(3)])
    received = broker.consume.receive("g", "t", max_messages=100)
    assert received
    assert lambda_response_bytes(received, write_json) <= lambda_response_bytes(received)
    for one in received:
        assert lambda_response_bytes([one], write_json) - lambda_response_bytes(
            [], write_json
        ) <= wire_size(one.message)
