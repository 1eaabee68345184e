"""A delay object missing behind its delay item: only that item is held back, the others of
its move are released once; the item is dropped only once its retention may have passed
(a lifecycle expiry is possible only then), never because its object was not found."""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from broker_helpers import object_keys
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.storage.clients import observe_calls

RETENTION_HOURS = 72


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


def sends_due_together(broker: Broker, clock, count: int) -> tuple[int, dict[str, str]]:
    """``count`` sends (one delay object each) of one message due at the same second in
    queue 0: one move (chunk). Returns the due time and each message's delay object."""
    broker.admin.create_topic("t", queues=1)
    due = clock.now + 30_000
    objects = {}
    for i in range(count):
        broker.produce.send(
            "t", [MessageInput(f"m{i}".encode(), delivery_timestamp=due, message_id=f"m{i}")]
        )
        [key] = {i["object_key"]["S"] for i in delay_items(broker)} - set(objects.values())
        objects[f"m{i}"] = key
    return due, objects


def test_a_missing_delay_object_holds_back_its_item_alone(delays, clock):
    due, objects = sends_due_together(delays, clock, 5)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.delete_object(Bucket=delays.settings.bucket, Key=objects["m2"])
    clock.now = due
    tick = delays.delay_release.tick()
    assert tick.moved == 4 and tick.left == 0
    assert stored_ids(delays, "t") == ["m0", "m1", "m3", "m4"]
    # its object vanished long before any lifecycle rule could take it: the item is kept
    [kept] = delay_items(delays)
    assert kept["object_key"]["S"] == objects["m2"]
    clock.advance(60)
    again = delays.delay_release.tick()
    assert (again.moved, again.left) == (0, 0)
    assert stored_ids(delays, "t") == ["m0", "m1", "m3", "m4"]  # each released once

    clock.now = due + RETENTION_HOURS * 3_600_000  # its retention may have passed now
    delays.delay_release.tick()
    assert delay_items(delays) == []
    assert stored_ids(delays, "t") == ["m0", "m1", "m3", "m4"]


def test_a_missing_delay_object_past_retention_drops_its_item_alone(delays, clock):
    due, objects = sends_due_together(delays, clock, 3)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.delete_object(Bucket=delays.settings.bucket, Key=objects["m0"])
    clock.now = due + RETENTION_HOURS * 3_600_000 + 1000  # an outage: the run comes late
    tick = delays.delay_release.tick()
    assert tick.moved == 2 and tick.left == 0
    assert stored_ids(delays, "t") == ["m1", "m2"]
    assert delay_items(delays) == []


def test_an_object_deleted_by_a_run_that_moved_its_item_settles_nothing_twice(delays, clock):
    due, objects = sends_due_together(delays, clock, 2)
    clock.now = due
    other = Broker(delays.settings, clock)  # another container, its own caches
    raced: list[bool] = []

    def race(service: str, operation: str, _params: dict) -> None:
        if operation == "GetObject" and not raced:  # the first run read the items, not yet
            raced.append(True)  # their objects: the other run moves both and deletes them
            assert other.delay_release.tick().moved == 2

    remove = observe_calls(race)
    try:
        tick = delays.delay_release.tick()
    finally:
        remove()
    assert raced and (tick.moved, tick.left) == (0, 2)  # its writes were refused: no drop
    assert delays.delay_release.tick().moved == 0
    assert stored_ids(delays, "t") == ["m0", "m1"]
    assert delay_items(delays) == []
    assert not [k for k in objects.values() if k in object_keys(delays)]
