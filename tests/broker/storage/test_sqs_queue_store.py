"""The SQS queue attribute item: every change is fenced on the version it read, so two
requests changing the item at once (attributes, tags, policy, purge mark, dead-letter
sources) never lose each other's change."""

from __future__ import annotations

import pytest
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import Busy, TopicNotFound
from cirrusmq_broker.storage.dynamo import to_item
from cirrusmq_broker.storage.sqs_queues import MAX_ATTEMPTS, SQS_STREAM


def test_a_change_landing_between_the_read_and_the_write_is_kept(broker: Broker) -> None:
    store = broker.sqs_queues
    store.put("g", {"VisibilityTimeout": "30"})
    seen: list[dict[str, str] | None] = []

    def tag_it(attributes: dict[str, str] | None) -> dict[str, str]:
        seen.append(attributes)
        if len(seen) == 1:  # another request changes the item after this one read it
            store.update("g", lambda other: {**(other or {}), "cirrusmq:PurgedAt": "5"})
        return {**(attributes or {}), "cirrusmq:Tags": '{"a": "1"}'}

    stored = store.update("g", tag_it)
    assert seen == [
        {"VisibilityTimeout": "30"},
        {"VisibilityTimeout": "30", "cirrusmq:PurgedAt": "5"},  # made again on the winner's
    ]
    assert (
        stored
        == store.get("g")
        == {
            "VisibilityTimeout": "30",
            "cirrusmq:PurgedAt": "5",
            "cirrusmq:Tags": '{"a": "1"}',
        }
    )


def test_a_first_write_races_another_first_write(broker: Broker) -> None:
    store = broker.sqs_queues
    calls = []

    def first(attributes: dict[str, str] | None) -> dict[str, str]:
        calls.append(attributes)
        if len(calls) == 1:
            store.update("g", lambda _: {"Policy": "{}"})
        return {**(attributes or {}), "DelaySeconds": "5"}

    store.update("g", first)
    assert calls == [None, {"Policy": "{}"}]
    assert store.get("g") == {"Policy": "{}", "DelaySeconds": "5"}


def test_an_item_of_a_release_without_versions_is_fenced_too(broker: Broker) -> None:
    store = broker.sqs_queues
    legacy = {"group_name": "g", "stream": SQS_STREAM, "attributes": {"DelaySeconds": "1"}}
    store._client.put_item(TableName=store._table, Item=to_item(legacy))
    calls = []

    def change(attributes: dict[str, str] | None) -> dict[str, str]:
        calls.append(attributes)
        if len(calls) == 1:
            store.update("g", lambda other: {**(other or {}), "cirrusmq:Tags": "{}"})
        return {**(attributes or {}), "DelaySeconds": "2"}

    store.update("g", change)
    assert store.get("g") == {"DelaySeconds": "2", "cirrusmq:Tags": "{}"}
    assert len(calls) == 2


def test_a_refused_change_stores_nothing_and_an_unchanged_one_writes_nothing(
    broker: Broker,
) -> None:
    store = broker.sqs_queues
    store.put("g", {"DelaySeconds": "1"})

    def refuse(_: dict[str, str] | None) -> dict[str, str]:
        raise ValueError("bad input")

    with pytest.raises(ValueError):
        store.update("g", refuse)
    assert store.update("g", lambda attributes: attributes) == {"DelaySeconds": "1"}
    assert store.get("g") == {"DelaySeconds": "1"}
    assert store.update("other", lambda attributes: None) is None
    assert store.get("other") is None


def test_a_change_that_always_loses_ends_busy(broker: Broker) -> None:
    store = broker.sqs_queues
    store.put("g", {})
    rounds = []

    def always_raced(attributes: dict[str, str] | None) -> dict[str, str]:
        rounds.append(1)
        store.update("g", lambda other: {**(other or {}), "n": str(len(rounds))})
        return {**(attributes or {}), "mine": "x"}

    with pytest.raises(Busy):
        store.update("g", always_raced)
    assert len(rounds) == MAX_ATTEMPTS
    assert "mine" not in (store.get("g") or {})


def test_an_update_racing_the_queue_s_delete_brings_no_item_back(broker: Broker) -> None:
    store = broker.sqs_queues
    store.put("g", {"VisibilityTimeout": "30"})

    def tag_it(attributes: dict[str, str] | None) -> dict[str, str]:
        store.delete("g")  # DeleteQueue lands after this request read the item
        return {**(attributes or {}), "cirrusmq:Tags": '{"a": "1"}'}

    with pytest.raises(TopicNotFound):
        store.update("g", tag_it)
    assert store.get("g") is None


def test_a_stale_writer_does_not_overwrite_a_queue_created_again(broker: Broker) -> None:
    store = broker.sqs_queues
    store.put("g", {"VisibilityTimeout": "5"})
    calls = []

    def stale(attributes: dict[str, str] | None) -> dict[str, str]:
        calls.append(attributes)
        if len(calls) == 1:  # the queue is deleted and created again meanwhile
            store.delete("g")
            store.put("g", {"VisibilityTimeout": "60"})
        return {**(attributes or {}), "DelaySeconds": "9"}

    store.update("g", stale)
    assert calls[1] == {"VisibilityTimeout": "60"}
    assert store.get("g") == {"VisibilityTimeout": "60", "DelaySeconds": "9"}
