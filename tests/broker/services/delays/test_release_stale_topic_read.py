"""A release that reads its target topic eventually consistently may find nothing (a
replica behind the topic's write): that is no proof the topic is gone, and its delay items
are never dropped on it. Only a topic a consistent read finds gone drops them."""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from broker_helpers import lagging_item_reads
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.storage.clients import aws_client


@pytest.fixture
def delays(settings, clock, monkeypatch) -> Broker:
    monkeypatch.setattr(release, "MOVE_WORKERS", 1)  # in-process moto: one thread
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TimersTable" in t)
    return Broker(dataclasses.replace(settings, timers_table=table), clock)


def delay_items(broker: Broker) -> list[dict]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.timers_table, ConsistentRead=True)["Items"]
    return [i for i in items if "object_key" in i]


def stored_ids(broker: Broker, topic: str) -> list[str]:
    ids = []
    for base, _key in sorted(broker.index.keys_of(topic, 0)):
        entry = broker.index.entry_at(topic, 0, base)
        ids += [m.message_id for m in broker.reader.messages(entry)]
    return ids


def delayed_send(broker: Broker, clock) -> int:
    broker.admin.create_topic("t", queues=1)
    due = clock.now + 30_000
    broker.produce.send("t", [MessageInput(b"m", delivery_timestamp=due, message_id="m")])
    return due


def test_a_stale_read_of_the_topic_releases_its_delayed_messages(delays, clock):
    due = delayed_send(delays, clock)
    clock.now = due
    scheduler = Broker(delays.settings, clock)  # another container: no topic cached
    client = aws_client("dynamodb", delays.settings)
    with lagging_item_reads(client, delays.settings.topics_table):
        tick = scheduler.delay_release.tick()
    assert (tick.moved, tick.left) == (1, 0)
    assert stored_ids(delays, "t") == ["m"]
    assert delay_items(delays) == []


def test_a_deleted_topic_drops_its_delay_items(delays, clock):
    due = delayed_send(delays, clock)
    delays.admin.delete_topic("t")
    clock.now = due
    scheduler = Broker(delays.settings, clock)
    tick = scheduler.delay_release.tick()
    assert (tick.moved, tick.left) == (0, 0)
    assert delay_items(delays) == []
