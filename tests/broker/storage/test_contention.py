"""DynamoDB transactions cancelled by concurrent writes (TransactionConflict) or throttling:
the stores that re-read and retry do so; anywhere else the caller gets 503 Busy, never a
500; a cancellation with a failed condition still reaches its store."""

from __future__ import annotations

import pytest
from broker_helpers import DynamoAnswer, transactions_cancelled
from cirrusmq_broker.errors import StorageContended, TopicAlreadyExists
from cirrusmq_broker.model import MessageInput, ProducerStamp
from cirrusmq_broker.storage.clients import contended


@pytest.mark.parametrize(
    ("reasons", "retriable"),
    [
        (["TransactionConflict", "None", "None"], True),
        (["None", "ThrottlingError"], True),
        (["ProvisionedThroughputExceeded"], True),
        (["TransactionConflict", "ConditionalCheckFailed"], False),
        (["ConditionalCheckFailed", "None"], False),
        (["ValidationError", "None"], False),
        (["None", "None"], False),
        ([], False),
    ],
)
def test_only_conflicts_and_throttling_make_a_cancellation_retriable(reasons, retriable):
    parsed = {"CancellationReasons": [{"Code": code} for code in reasons]}
    assert contended(parsed) is retriable


def test_two_containers_creating_one_topic_at_once_never_answer_a_fault(settings, clock):
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.errors import BrokerError

    first, second = Broker(settings, clock), Broker(settings, clock)
    client = first.admin._store._client
    calls: list[str] = []

    def overlapping(params, **_):
        """The other container's create holds the items when this one's transaction
        arrives (what DynamoDB answers the loser: TransactionConflict per item)."""
        if calls:
            return None
        calls.append("conflict")
        second.admin.create_topic("t", queues=2)
        # the topic put and the two heads' reopen updates, all touched by the other one
        reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing"}] * 3
        parsed = {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": reasons,
        }
        return DynamoAnswer(400), parsed

    event = "before-call.dynamodb.TransactWriteItems"
    client.meta.events.register(event, overlapping)
    try:
        with pytest.raises(BrokerError):  # 409 TopicAlreadyExists (or 503 Busy), never a 500
            first.admin.create_topic("t", queues=2)
    finally:
        client.meta.events.unregister(event, overlapping)
    assert calls == ["conflict"]


def test_a_create_cancelled_by_a_conflict_answers_busy(broker):
    cancelled = transactions_cancelled(broker._dynamodb, "TransactionConflict", "None")
    with cancelled as calls, pytest.raises(StorageContended) as raised:
        broker.admin.create_topic("t", queues=1)
    assert calls == ["cancelled"]
    assert (raised.value.code, raised.value.http_status, raised.value.retriable) == (
        "Busy",
        503,
        True,
    )
    broker.admin.create_topic("t", queues=1)  # nothing was stored: the retry succeeds
    with pytest.raises(TopicAlreadyExists):  # a failed condition still maps to its error
        broker.admin.create_topic("t", queues=1)


def test_an_append_cancelled_by_conflicts_is_sent_again_and_stored_once(broker):
    """A deduplicating send's record goes in its append's transaction."""
    broker.admin.create_topic("t", queues=1)
    with transactions_cancelled(broker._dynamodb, "TransactionConflict", "None", times=2) as calls:
        [receipt] = broker.produce.send(
            "t", [MessageInput(b"a")], ProducerStamp("p", 1), deduplication_ms=300_000
        ).receipts
    assert calls == ["cancelled", "cancelled", "sent"]
    assert receipt.offset == 0
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"a"]
