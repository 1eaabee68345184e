"""A receive that holds messages answers in time: a backlog of expired leases to move on
does not keep it past its deadline (the held messages would sit invisible while the caller
gave up on the answer)."""

from __future__ import annotations

import time
import types

from broker_helpers import send
from cirrusmq_broker.services import retries as retries_module
from cirrusmq_broker.services.delivery import receive as receive_module
from cirrusmq_broker.services.moves import MoveAppender
from cirrusmq_broker.services.retries import lease_expiry


def test_a_backlog_of_expired_leases_stops_at_the_deadline_once_messages_are_held(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [x] = broker.consume.receive("g", "t")
    broker.retries.nack("g", [x.receipt_handle])  # x is due again in 10 s
    backlog = retries_module.MAX_MOVES_PER_PASS
    send(broker, "t", *[b"%d" % i for i in range(backlog)])
    for _ in range(backlog):
        broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    clock.advance(10)  # x is due, every lease expired

    seconds = [time.monotonic()]  # each move takes a second
    fake_time = types.SimpleNamespace(monotonic=lambda: seconds[0], sleep=lambda s: None)
    monkeypatch.setattr(receive_module, "time", fake_time)
    monkeypatch.setattr(lease_expiry, "time", fake_time)
    real, moves = MoveAppender.append, []

    def slow_append(self, topic, queue, messages, stamp, *args, **kwargs):
        if stamp.producer_id.startswith("~expire"):
            moves.append(stamp)
            seconds[0] += 1.0
        return real(self, topic, queue, messages, stamp, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "append", slow_append)
    got = broker.consume.receive("g", "t", max_messages=32)
    assert [m.message.body for m in got] == [b"x"]
    assert len(moves) <= receive_module.MIN_PASS_SECONDS + 1  # not the whole backlog
    while len(moves) < backlog:  # the next receives move the rest
        before = len(moves)
        broker.consume.receive("g", "t", max_messages=32)
        assert len(moves) > before
