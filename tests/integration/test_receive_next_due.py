"""An empty receive's ``next_due_ms``: when something of the group it could not serve yet (a
lease of another consumer, a retry in its backoff) may become receivable. No append
announces those, so a consumer idle on the notification channel looks again then.

Through the local stack over real HTTP; the stack's clock is advanced (the values asserted
are ranges: the stack's clock also runs)."""

from __future__ import annotations

import uuid

from api_helpers import b64, make_topic, receive, send


def _topic_with_one(api) -> str:
    topic = f"due-{uuid.uuid4().hex[:10]}"
    make_topic(api, topic, queues=2)
    send(api, topic, {"body": b64(b"held")})
    return topic


def _empty_receive(api, group: str, topic: str) -> dict:
    response = api.post(f"/v1/groups/{group}/receive", json={"topic": topic})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["messages"] == []
    return body


def test_an_empty_receive_with_nothing_pending_has_no_next_due(api, cirrusmq_stack):
    """An acked lease may still be named once (the queue's summary keeps a lower bound of
    its deadlines, an ack does not rewrite it): the receive at that time makes it exact."""
    topic = _topic_with_one(api)
    [message] = receive(api, "g", topic, invisible_seconds=30)
    acked = api.post("/v1/groups/g/ack", json={"receipt_handles": [message["receipt_handle"]]})
    assert acked.json()["acked"] == 1, acked.text
    hint = _empty_receive(api, "g", topic).get("next_due_ms")
    assert hint is None or 1_000 <= hint <= 30_000
    cirrusmq_stack.advance_time(31)
    assert _empty_receive(api, "g", topic).get("next_due_ms") is None
    empty = f"due-{uuid.uuid4().hex[:10]}"
    make_topic(api, empty, queues=1)
    assert _empty_receive(api, "g", empty).get("next_due_ms") is None


def test_an_empty_receive_tells_when_a_lease_ends_then_when_its_retry_is_due(api, cirrusmq_stack):
    topic = _topic_with_one(api)
    [held] = receive(api, "g", topic, invisible_seconds=60)  # consumer A: never acks
    hint = _empty_receive(api, "g", topic)["next_due_ms"]  # consumer B
    assert 1_000 <= hint <= 60_000
    cirrusmq_stack.advance_time(61)  # A's lease ends: B's receive moves it to the retry topic
    hint = _empty_receive(api, "g", topic)["next_due_ms"]
    assert 1_000 <= hint <= 10_000  # the first backoff
    cirrusmq_stack.advance_time(10)
    [again] = receive(api, "g", topic)
    assert (again["message_id"], again["delivery_attempt"]) == (held["message_id"], 2)


def test_an_empty_receive_tells_when_another_consumers_nack_comes_back(api):
    topic = _topic_with_one(api)
    [held] = receive(api, "g", topic)
    nacked = api.post("/v1/groups/g/nack", json={"receipt_handles": [held["receipt_handle"]]})
    assert nacked.json()["nacked"] == 1, nacked.text
    hint = _empty_receive(api, "g", topic)["next_due_ms"]
    assert 1_000 <= hint <= 10_000


def test_a_lease_past_its_deadline_is_not_a_hint(api, cirrusmq_stack):
    """A deadline already passed was dealt with by the receive (moved, or left to the next
    pass): a hint for it would make a consumer poll in a loop."""
    topic = _topic_with_one(api)
    receive(api, "g", topic, invisible_seconds=10)
    cirrusmq_stack.advance_time(11)
    hint = _empty_receive(api, "g", topic)["next_due_ms"]
    assert 5_000 <= hint <= 10_000  # the retry's backoff, not the passed lease (the floor)
