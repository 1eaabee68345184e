"""Janitor on in-process moto: orphan sweeping and purging deleted topics."""

from __future__ import annotations

import pytest
from broker_helpers import index_items, object_keys, send, statuses
from cirrusmq_broker.errors import TopicBeingDeleted, TopicNotFound
from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS
from cirrusmq_broker.services.produce import MessageInput
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


def test_deleted_topic_is_purged_after_the_delay(broker, clock):
    broker.admin.create_topic("t", queues=2)
    send(broker, "t", b"a", b"b")
    broker.consume.receive("g", "t")
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
    assert [r.offset for r in send(broker, "t", b"new")] == [0]
    assert [m.message.body for m in broker.consume.receive("g", "t")] == [b"new"]


def _real_now() -> int:
    import time

    return time.time_ns() // 1_000_000
