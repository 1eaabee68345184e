"""A message's trace shows a key only what it could read through the API."""

from __future__ import annotations

from cirrusmq import Admin, Message, Permissions, Producer, SimpleConsumer, SubscribeGrant

from .conftest import unique


def test_a_consumer_key_sees_its_groups_events_and_no_producer_id(
    endpoint,
    credentials,
    admin: Admin,
    make_topic,  # noqa: ANN001
) -> None:
    topic = make_topic("visible", queues=1, trace=True)
    mine, other = unique("g-mine"), unique("g-other")
    with Producer(endpoint, credentials) as producer:
        message_id = producer.send(Message(topic, b"x")).message_id
    for group in (mine, other):
        with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=0) as consumer:
            consumer.ack_batch(consumer.receive(1, 30))
    everything = admin.trace_message(topic, message_id)
    assert {e.group for e in everything} == {None, mine, other}
    assert everything[0].kind == "sent" and everything[0].producer_id

    key = admin.create_access_key(
        Permissions(subscribe=(SubscribeGrant(groups=(mine,), topics=(topic,)),)), "trace view"
    )
    try:
        with Admin(endpoint, key.credentials) as narrow:
            seen = narrow.trace_message(topic, message_id)
    finally:
        admin.delete_access_key(key.access_key)
    assert [(e.kind, e.group) for e in seen] == [
        ("sent", None),
        ("delivered", mine),
        ("acked", mine),
    ]
    assert all(e.producer_id is None and e.transaction_id is None for e in seen)
