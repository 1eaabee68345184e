"""Janitor on in-process moto: orphan sweeping, purging deleted topics, topics created again."""

from __future__ import annotations

import zlib

import pytest
from broker_helpers import index_items, object_keys, send, statuses
from cirrusmq_broker.container import Broker
from cirrusmq_broker.errors import TopicBeingDeleted, TopicNotFound
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS
from cirrusmq_broker.storage.appends import BatchAppender


class SimulatedCrash(BaseException):
    pass


def test_orphans_are_swept_after_the_grace_period_only(broker, clock, monkeypatch):
    clock.now = _real_now()  # moto stamps objects with the real clock
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"kept")
    with monkeypatch.context() as patch:
        patch.setattr(
            BatchAppender, "append", lambda *a, **k: (_ for _ in ()).throw(SimulatedCrash())
        )
        with pytest.raises(SimulatedCrash):
            broker.produce.send("t", [MessageInput(b"orphaned")])
    assert len(object_keys(broker)) == 2 and len(index_items(broker)) == 1
    clock.now = _real_now() + (broker.settings.orphan_grace_seconds - 30) * 1000
    assert broker.janitor.sweep_orphans().deleted == 0
    clock.now = _real_now() + (broker.settings.orphan_grace_seconds + 30) * 1000
    assert broker.janitor.sweep_orphans().deleted == 1
    assert len(object_keys(broker)) == 1
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"kept"]


def test_deleted_topic_is_purged_after_the_delay(broker, clock, s3_clock):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"a", b"b")
    broker.consume.receive("g", "t")
    old_heads = {q: broker.heads.get("t", q).next_offset for q in (0, 1)}
    broker.admin.delete_topic("t")
    with pytest.raises(TopicNotFound):
        broker.produce.send("t", [MessageInput(b"x")])
    with pytest.raises(TopicBeingDeleted):
        broker.admin.create_topic("t")
    assert broker.janitor.purge_deleted_topics() == []
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics() == ["t"]
    assert object_keys(broker) == [] and index_items(broker) == []
    assert statuses(broker, "g") == []
    broker.admin.create_topic("t", queues=2)  # the name is free again, with a fresh log
    [receipt] = send(broker, "t", b"new")  # whose offsets go on from the old ones
    assert receipt.offset == old_heads[receipt.queue]
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"new"]


def test_a_recreated_topic_goes_on_from_the_old_offsets(broker, clock):
    """Offsets never name two messages: a topic deleted and created again (with fewer or
    more queues) goes on from the old topic's offsets; a queue it never had starts at 0."""

    def send_to(queue: int, queues: int) -> int:
        group = next(f"g{n}" for n in range(1000) if zlib.crc32(f"g{n}".encode()) % queues == queue)
        [receipt] = broker.produce.send("t", [MessageInput(b"m", message_group=group)]).receipts
        assert receipt.queue == queue
        return receipt.offset

    def recreate(queues: int) -> None:
        broker.admin.delete_topic("t")
        clock.advance(PURGE_DELAY_SECONDS + 1)
        assert broker.janitor.purge_deleted_topics() == ["t"]
        broker.admin.create_topic("t", queues=queues)

    broker.admin.create_topic("t", queues=2)
    assert [send_to(0, 2) for _ in range(3)] == [0, 1, 2]
    recreate(1)
    assert send_to(0, 1) == 3
    recreate(3)
    assert (send_to(0, 3), send_to(1, 3), send_to(2, 3)) == (4, 0, 0)
    recreate(3)
    assert (send_to(0, 3), send_to(1, 3), send_to(2, 3)) == (5, 1, 1)


def test_a_janitor_run_overlapping_another_leaves_a_recreated_topic_alone(settings, clock):
    from broker_helpers import send
    from cirrusmq_broker.container import Broker
    from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS

    admin, late = Broker(settings, clock), Broker(settings, clock)
    admin.admin.create_topic("t", queues=1)
    send(admin, "t", b"old")
    admin.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    listed = late.janitor._topics.list()  # a second run (e.g. a duplicate schedule
    # delivery) lists the topics while the first one purges
    assert admin.janitor.purge_deleted_topics() == ["t"]
    admin.admin.create_topic("t", queues=1)  # "created again once the purge is done"
    [receipt] = send(admin, "t", b"new")  # acknowledged
    late.janitor._topics.list = lambda: listed  # the late run goes on from its listing
    late.janitor.purge_deleted_topics()
    assert admin.topic_store.get("t", consistent=True) is not None, "the new topic is gone"
    got = admin.consume.receive("g", "t")
    assert [m.message.body for m in got] == [b"new"], "an acknowledged message was purged"


@pytest.mark.parametrize("overtaken_after_check", [1, 2, 3, 4])
def test_a_purge_step_overtaken_by_another_run_and_a_create_deletes_nothing_new(
    settings, clock, s3_clock, monkeypatch, overtaken_after_check
):
    """A run that checked the topic item is still the deleted incarnation, then stalled
    while another run finished the purge and the topic was created again and sent to,
    deletes nothing of the new topic in the step it goes on with."""
    from cirrusmq_broker.container import Broker

    admin, late = Broker(settings, clock), Broker(settings, clock)
    admin.admin.create_topic("t", queues=1)
    send(admin, "t", b"old")
    admin.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    store = late.janitor._topics
    read = store.get
    checks: list[object] = []

    def stalled(name, *, consistent=False):
        found = read(name, consistent=consistent)
        checks.append(found)
        if len(checks) == overtaken_after_check:
            assert admin.janitor.purge_deleted_topics() == ["t"]
            admin.admin.create_topic("t", queues=1)
            send(admin, "t", b"new")
        return found

    monkeypatch.setattr(store, "get", stalled)
    assert late.janitor.purge_deleted_topics() == []
    assert admin.topic_store.get("t", consistent=True).status.value == "ACTIVE"
    assert len(index_items(admin)) == 1 and len(object_keys(admin)) == 1
    assert [m.message.body for m in admin.consume.receive("g", "t")] == [b"new"]


def _real_now() -> int:
    import time

    return time.time_ns() // 1_000_000


def test_producer_elsewhere_continues_a_recreated_topic_after_the_old_offsets(settings, clock):
    producer, admin = Broker(settings, clock), Broker(settings, clock)
    admin.admin.create_topic("t", queues=1)
    assert [r.offset for r in send(producer, "t", b"a", b"b")] == [0, 1]
    admin.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    admin.janitor.purge_deleted_topics()
    clock.advance(1)
    admin.admin.create_topic("t", queues=1)
    producer.catalog.forget("t")  # its 30 s topic cache expired long before the purge
    assert [r.offset for r in send(producer, "t", b"c")] == [2]  # offsets never repeat


def test_a_purge_lists_a_general_purpose_bucket_once(broker, clock, s3_clock):
    """A listing after a key survives the deletes behind it: one pass finds every object,
    so a second listing of the topic would be a LIST (and a topic read) per 1,000 objects
    for nothing."""
    from collections import Counter

    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"a", b"b", b"c")
    broker.admin.delete_topic("t")
    clock.advance(PURGE_DELAY_SECONDS + 1)
    seen: Counter[str] = Counter()
    remove = observe_calls(lambda _service, operation, _params: seen.update([operation]))
    try:
        assert broker.janitor.purge_deleted_topics() == ["t"]
    finally:
        remove()
    assert object_keys(broker) == []
    assert seen["ListObjectsV2"] == 1
