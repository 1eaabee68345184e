"""A message id may hold ``:`` (``[A-Za-z0-9_.:-]``): clients percent-encode it in a path
(``order%3A1``), and the routes that take a message id read it decoded."""

from __future__ import annotations

from api_helpers import b64, make_topic, send
from cirrusmq import Admin


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
