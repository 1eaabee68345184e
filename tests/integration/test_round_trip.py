"""Produce → receive → ack over HTTP through the local stack."""

from __future__ import annotations

import base64
import concurrent.futures
import time

import pytest
from api_helpers import ack, b64, make_topic, max_offsets, object_keys, receive, send


def test_topic_lifecycle(api, topic_name):
    created = make_topic(api, topic_name, queues=3, message_type="FIFO", retention_hours=24)
    assert {k: created[k] for k in ("name", "queues", "message_type", "retention_hours")} == {
        "name": topic_name,
        "queues": 3,
        "message_type": "FIFO",
        "retention_hours": 24,
    }
    assert topic_name in [t["name"] for t in api.get("/v1/topics").json()["topics"]]
    described = api.get(f"/v1/topics/{topic_name}").json()
    assert described["queue_offsets"] == [
        {"queue": q, "min_offset": 0, "max_offset": 0} for q in range(3)
    ]
    assert api.delete(f"/v1/topics/{topic_name}").status_code == 204
    assert topic_name not in [t["name"] for t in api.get("/v1/topics").json()["topics"]]
    assert api.get(f"/v1/topics/{topic_name}").json()["code"] == "TopicNotFound"


def test_round_trip_keeps_every_field(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, queues=2)
    body = bytes(range(256))
    sent = send(
        api,
        topic_name,
        {
            "body": b64(body),
            "message_id": "order-1",
            "tag": "TagA",
            "keys": ["k1", "k2"],
            "properties": {"color": "blue"},
            "message_group": "customer-7",
            "born_timestamp": 1234,
        },
        {"body": b64(b"second"), "tag": "TagB"},
    )
    first_receipt = sent["receipts"][0]
    assert first_receipt["message_id"] == "order-1" and sent["duplicate"] is False

    got = receive(api, "g1", topic_name, max_messages=10)
    assert len(got) == 2
    first = next(m for m in got if m["message_id"] == "order-1")
    assert base64.b64decode(first["body"]) == body
    assert (first["tag"], first["keys"], first["properties"], first["message_group"]) == (
        "TagA",
        ["k1", "k2"],
        {"color": "blue"},
        "customer-7",
    )
    assert (first["queue"], first["offset"]) == (first_receipt["queue"], first_receipt["offset"])
    assert first["born_timestamp"] == 1234 and first["delivery_attempt"] == 1
    assert first["stored_timestamp"] >= first["born_timestamp"]

    assert ack(api, "g1", got).json()["acked"] == 2
    group = api.get("/v1/groups/g1", params={"topic": topic_name}).json()
    assert sum(q["lag"] for q in group["queues"]) == 0
    assert sum(q["inflight"] for q in group["queues"]) == 0
    assert receive(api, "g1", topic_name) == []

    looked_up = api.get(f"/v1/topics/{topic_name}/messages/order-1").json()
    assert base64.b64decode(looked_up["body"]) == body and looked_up["tag"] == "TagA"
    queues_touched = {r["queue"] for r in sent["receipts"]}
    assert len(object_keys(cirrusmq_stack, topic_name)) == len(queues_touched)  # one per queue


def test_tag_filter(api, topic_name):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, *({"body": b64(t.encode()), "tag": t} for t in ["A", "B", "C", "A"]))
    got = receive(api, "filtered", topic_name, filter="A || C", max_messages=10)
    assert [m["tag"] for m in got] == ["A", "C", "A"]
    assert ack(api, "filtered", got).status_code == 200
    [queue] = api.get("/v1/groups/filtered").json()["queues"]
    assert queue["committed_offset"] == 4 and queue["lag"] == 0


def test_eight_concurrent_producers_on_one_queue(api, topic_name):
    """Offsets are contiguous and every message is delivered exactly once."""
    make_topic(api, topic_name, queues=1)
    producers, batches, per_batch = 8, 6, 5

    def produce(p: int) -> list[dict]:
        receipts = []
        for b in range(batches):
            messages = [
                {"body": b64(f"{p}-{b}-{i}".encode()), "message_id": f"m-{p}-{b}-{i}"}
                for i in range(per_batch)
            ]
            receipts += send(api, topic_name, *messages)["receipts"]
        return receipts

    with concurrent.futures.ThreadPoolExecutor(producers) as pool:
        receipts = [r for rs in pool.map(produce, range(producers)) for r in rs]
    total = producers * batches * per_batch
    assert sorted(r["offset"] for r in receipts) == list(range(total))
    assert max_offsets(api, topic_name) == [total]

    delivered = []
    while batch := receive(api, "exactly-once", topic_name, max_messages=100):
        delivered += batch
        assert ack(api, "exactly-once", batch).status_code == 200
    assert sorted(m["message_id"] for m in delivered) == sorted(r["message_id"] for r in receipts)
    assert [m["offset"] for m in delivered] == list(range(total))


def test_idempotent_retry_returns_original_receipts_and_stores_nothing(
    api, cirrusmq_stack, topic_name
):
    make_topic(api, topic_name, queues=4)
    request = {"producer_id": "producer-a", "sequence": 41}
    messages = [{"body": b64(b"once")}, {"body": b64(b"twice?"), "message_group": "g"}]
    first = send(api, topic_name, *messages, **request)
    keys, offsets = object_keys(cirrusmq_stack, topic_name), max_offsets(api, topic_name)

    retry = send(api, topic_name, *messages, **request)

    assert retry["duplicate"] is True and retry["receipts"] == first["receipts"]
    assert object_keys(cirrusmq_stack, topic_name) == keys
    assert max_offsets(api, topic_name) == offsets
    conflict = api.post(
        f"/v1/topics/{topic_name}/messages",
        json={"messages": [{"body": b64(b"different")}], **request},
    )
    assert (conflict.status_code, conflict.json()["code"]) == (409, "IdempotencyConflict")


def test_long_poll_waits_for_a_message(api, topic_name):
    """A message sent while a long poll waits is delivered by that poll (how soon it wakes
    is a figure of tests/benchmarks/long_polls.py, not an assertion here)."""
    make_topic(api, topic_name, queues=2)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(receive, api, "poller", topic_name, wait_seconds=20)
        time.sleep(1.0)
        send(api, topic_name, {"body": b64(b"late")})
        got = waiting.result()
    assert [base64.b64decode(m["body"]) for m in got] == [b"late"]


@pytest.mark.slow
def test_unacked_message_is_redelivered_after_invisible_duration(api, topic_name, cirrusmq_stack):
    make_topic(api, topic_name, queues=2)
    send(api, topic_name, {"body": b64(b"retry me")})
    [first] = receive(api, "redelivery", topic_name, invisible_seconds=10)
    assert receive(api, "redelivery", topic_name) == []
    time.sleep(10.5)
    # Its invisible time ran out: the next receive moves it to the group's retry topic, from
    # which it comes back after the first backoff level (10 s) as delivery attempt 2.
    assert receive(api, "redelivery", topic_name) == []
    cirrusmq_stack.advance_time(11)
    [again] = receive(api, "redelivery", topic_name, invisible_seconds=10, wait_seconds=10)
    assert again["message_id"] == first["message_id"] and again["delivery_attempt"] == 2

    stale = ack(api, "redelivery", [first, again])
    assert stale.status_code == 200
    assert stale.json()["acked"] == 1
    assert [(r["status"], r["code"]) for r in stale.json()["results"]] == [
        ("expired", "ReceiptHandleExpired"),
        ("acked", None),
    ]
    assert ack(api, "redelivery", [again]).json()["acked"] == 1  # acking twice is fine


def test_change_invisible_duration(api, topic_name):
    make_topic(api, topic_name, queues=1)
    send(api, topic_name, {"body": b64(b"x")})
    [m] = receive(api, "inv", topic_name, invisible_seconds=10)
    response = api.post(
        "/v1/groups/inv/invisible",
        json={"receipt_handle": m["receipt_handle"], "invisible_seconds": 3600},
    )
    assert response.status_code == 200
    changed = response.json()
    assert changed["invisible_until"] > m["invisible_until"]
    acked = ack(api, "inv", [{"receipt_handle": changed["receipt_handle"]}]).json()
    assert [r["status"] for r in acked["results"]] == ["acked"]
