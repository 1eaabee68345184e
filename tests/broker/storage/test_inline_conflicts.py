"""A write of a queue's summary while a transaction holds it: read again, never 503.

DynamoDB answers a plain write to an item that a TransactWriteItems holds at that moment
with TransactionConflictException, and cancels a transaction meeting such an item with the
reason TransactionConflict. The summary is the queue's hottest item: every receive's save,
the acks of the lease stored on it, move fences and steps write it."""

from __future__ import annotations

from contextlib import contextmanager

from broker_helpers import DynamoAnswer, ack_statuses, send
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.storage.groups.keys import summary_stream

SUMMARY = summary_stream("t", 0)
PLAIN = ("UpdateItem", "PutItem", "DeleteItem")


@contextmanager
def summary_held_once(broker):
    """The first write touching queue 0's summary meets another transaction holding it."""
    client = broker._dynamodb
    table = broker.settings.groups_table
    fired: list[str] = []

    def mark(params, context, **_):
        if fired:
            return
        if "TransactItems" in params:
            streams = [
                (body.get("Item") or body.get("Key", {})).get("stream", {}).get("S")
                if body.get("TableName") == table
                else None
                for entry in params["TransactItems"]
                for body in entry.values()
            ]
            context["held"] = [s == SUMMARY for s in streams] if SUMMARY in streams else None
        else:
            stream = (params.get("Item") or params.get("Key") or {}).get("stream", {}).get("S")
            context["held"] = params.get("TableName") == table and stream == SUMMARY

    def answer(context, model, **_):
        held = context.get("held")
        if not held or fired:
            return None
        fired.append(model.name)
        if model.name == "TransactWriteItems":
            reasons = [{"Code": "TransactionConflict" if h else "None"} for h in held]
            return DynamoAnswer(400), {
                "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                "CancellationReasons": reasons,
            }
        return DynamoAnswer(400), {
            "Error": {"Code": "TransactionConflictException", "Message": "Transaction is ongoing"}
        }

    events = client.meta.events
    for op in (*PLAIN, "TransactWriteItems"):
        events.register(f"before-parameter-build.dynamodb.{op}", mark, unique_id=f"held-{op}")
        events.register(f"before-call.dynamodb.{op}", answer, unique_id=f"held-call-{op}")
    try:
        yield fired
    finally:
        for op in (*PLAIN, "TransactWriteItems"):
            events.unregister(f"before-parameter-build.dynamodb.{op}", unique_id=f"held-{op}")
            events.unregister(f"before-call.dynamodb.{op}", unique_id=f"held-call-{op}")


def test_a_receive_whose_save_meets_a_transaction_on_the_summary_reads_again(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    broker.consume.receive("g", "t", invisible_seconds=10)  # the summary exists
    send(broker, "t", b"b")  # a's lease is on the summary: b's goes to an item
    clock.advance(1)
    with summary_held_once(broker) as fired:
        got = broker.consume.receive("g", "t", invisible_seconds=10)  # b: a lease item
    assert fired and [m.message.body for m in got] == [b"b"]


def test_a_receive_storing_its_lease_on_the_summary_meets_a_transaction(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    [a] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]  # the slot is free
    send(broker, "t", b"b")
    with summary_held_once(broker) as fired:  # e.g. a move's fence or a step holds it
        got = broker.consume.receive("g", "t", invisible_seconds=10)
    assert fired and [m.message.body for m in got] == [b"b"]  # re-read, not 503


def test_an_ack_meeting_a_transaction_on_the_summary(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", invisible_seconds=10)
    with summary_held_once(broker) as fired:  # a receive saving its item lease holds it
        statuses_ = ack_statuses(broker, "g", [a.receipt_handle])
    assert fired and statuses_ == ["acked"]  # sent again, not 503
    assert [m.message.body for m in broker.consume.receive("g", "t")] == []
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []  # acked is final


def test_an_ack_of_two_whole_leases_meeting_a_transaction_acks_each_on_its_own(broker, clock):
    """Two leases acked whole go in one transaction; when another write holds the summary
    of one, each lease is acked on its own (not 503)."""
    broker.admin.create_topic("t", queues=2)
    broker.produce.send("t", [MessageInput(b"m", message_group=f"k{n}") for n in range(8)])
    got = broker.consume.receive("g", "t", invisible_seconds=10, max_messages=10)
    assert {m.message.queue for m in got} == {0, 1}  # a lease on each queue's summary
    with summary_held_once(broker) as fired:
        statuses_ = ack_statuses(broker, "g", [m.receipt_handle for m in got])
    assert fired == ["TransactWriteItems"] and statuses_ == ["acked"] * 8
    clock.advance(11)
    assert broker.consume.receive("g", "t") == []  # acked is final
