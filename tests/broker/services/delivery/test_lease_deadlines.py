"""A lease a receive stores runs ``invisible_seconds`` from when it is stored: not from the
clock the pass (or its first, raced attempt) read before slow reads and moves."""

from __future__ import annotations

from broker_helpers import send
from cirrusmq_broker.services.batch_reader import BatchReader
from cirrusmq_broker.storage.groups import GroupStateStore


def test_a_lease_made_after_a_lost_save_runs_its_full_invisible_time(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    real, raced = GroupStateStore.save, []

    def save(self, state, *more):
        if state.touched and not raced:  # the first lease write loses a race meanwhile
            raced.append(True)
            clock.advance(30)
            return False
        return real(self, state, *more)

    monkeypatch.setattr(GroupStateStore, "save", save)
    [a] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert raced
    assert a.invisible_until >= clock() + 10_000
    assert broker.consume.receive("g", "t") == []  # not redelivered at once


def test_a_lease_runs_its_full_invisible_time_from_when_it_is_stored(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a")
    real, slow = BatchReader.messages, []

    def messages(self, entry):
        if not slow:  # a slow read of the batch (a loaded machine, a throttled S3)
            slow.append(True)
            clock.advance(30)
        return real(self, entry)

    monkeypatch.setattr(BatchReader, "messages", messages)
    [a] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert slow
    assert a.invisible_until >= clock() + 10_000
    assert broker.consume.receive("g", "t") == []  # not redelivered at once
