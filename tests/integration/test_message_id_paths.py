"""A message id may hold ``:`` (``[A-Za-z0-9_.:-]``): clients percent-encode it in a path
(``order%3A1``), and the routes that take a message id read it decoded."""

from __future__ import annotations

import uuid

from api_helpers import b64, make_topic, send
from cirrusmq import Admin
from ulid import ULID


def test_a_message_id_with_a_colon_is_looked_up_and_traced(api, cirrusmq_stack, topic_name):
    make_topic(api, topic_name, queues=1, trace=True)
    send(api, topic_name, {"message_id": "order:1", "body": b64(b"x")}, producer_id="p", sequence=0)
    assert api.get(f"/v1/topics/{topic_name}/messages/order%3A1").json()["message_id"] == (
        "order:1"
    )
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        assert admin.get_message(topic_name, "order:1").message_id == "order:1"
        events = admin.trace_message(topic_name, "order:1")
    assert [e.kind for e in events][:1] == ["sent"]


def test_a_ulid_is_looked_up_and_traced_by_its_uuid_spelling(api, cirrusmq_stack, topic_name):
    """SQS clients see a ULID message id spelled as a UUID (the same 128 bits): an operator
    pastes that spelling into a lookup or a trace and finds the message."""
    make_topic(api, topic_name, queues=1, trace=True)
    (receipt,) = send(api, topic_name, {"body": b64(b"x")})["receipts"]
    ulid = receipt["message_id"]
    spelled = str(ULID.from_str(ulid).to_uuid())
    assert api.get(f"/v1/topics/{topic_name}/messages/{spelled}").json()["message_id"] == ulid
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        assert admin.get_message(topic_name, spelled.upper()).message_id == ulid
        events = admin.trace_message(topic_name, spelled)
    assert [e.kind for e in events][:1] == ["sent"]
    assert {e.message_id for e in events} == {ulid}


def test_a_message_id_a_client_chose_in_uuid_form_is_found_as_written(
    api, cirrusmq_stack, topic_name
):
    """An id that is a UUID as the client wrote it (not a ULID's spelling) is found too."""
    make_topic(api, topic_name, queues=1, trace=True)
    chosen = str(uuid.uuid4())
    send(api, topic_name, {"message_id": chosen, "body": b64(b"x")}, producer_id=chosen, sequence=0)
    with Admin(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as admin:
        assert admin.get_message(topic_name, chosen).message_id == chosen
        events = admin.trace_message(topic_name, chosen)
    assert [e.kind for e in events][:1] == ["sent"]
