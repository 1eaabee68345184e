"""A slow orderly batch keeps its delivery: acks in small groups, renewals before its
invisible time ends, and a queued batch whose invisible time passed is skipped."""

from __future__ import annotations

import pytest
from cirrusmq import ConsumeResult, PushConsumer
from cirrusmq.consumer.orderly import BatchLease, run_orderly_batch

from .test_orderly import view


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_slow_batch_acks_what_is_done_and_extends_its_delivery():
    clock = Clock()
    calls: list[tuple] = []

    def listener(message):
        clock.now += 2.0  # 2 s per message: 32 take 64 s, longer than the 60 s lease
        calls.append(("listen", message.offset))
        return ConsumeResult.SUCCESS

    def extend(message):
        calls.append(("extend", message.offset))
        return True

    done = run_orderly_batch(
        [view(0, o) for o in range(32)],
        listener=listener,
        ack=lambda ms: calls.append(("ack", [m.offset for m in ms])),
        retry_now=lambda m: calls.append(("retry", m.offset)),
        suspend=lambda s: None,
        suspend_s=0,
        stopped=lambda: False,
        lease=BatchLease(clock.now + 60, 60),
        extend=extend,
        clock=clock,
    )
    assert done == 32
    acks = [c[1] for c in calls if c[0] == "ack"]
    assert acks == [list(range(16)), list(range(16, 32))]  # before the renewal, at the end
    extends = [c[1] for c in calls if c[0] == "extend"]
    assert extends == [16]  # at 32 s in (28 s left), before message 16; then 60 s more
    assert calls.index(("ack", list(range(16)))) < calls.index(("extend", 16))
    assert not [c for c in calls if c[0] == "retry"]


def test_a_batch_whose_invisible_time_passed_is_skipped():
    clock = Clock()
    seen: list[int] = []
    done = run_orderly_batch(
        [view(0, o) for o in range(3)],
        listener=lambda m: seen.append(m.offset) or ConsumeResult.SUCCESS,
        ack=lambda ms: seen.append(-1),
        retry_now=lambda m: None,
        suspend=lambda s: None,
        suspend_s=0,
        stopped=lambda: False,
        lease=BatchLease(clock.now - 0.001, 60),
        extend=lambda m: True,
        clock=clock,
    )
    assert (done, seen) == (0, [])


def test_a_stale_delivery_stops_the_batch_after_acking_what_finished():
    clock = Clock()
    acks: list[list[int]] = []

    def listener(message):
        clock.now += 20.0
        return ConsumeResult.SUCCESS

    done = run_orderly_batch(
        [view(0, o) for o in range(5)],
        listener=listener,
        ack=lambda ms: acks.append([m.offset for m in ms]),
        retry_now=lambda m: None,
        suspend=lambda s: None,
        suspend_s=0,
        stopped=lambda: False,
        lease=BatchLease(clock.now + 60, 60),
        extend=lambda m: False,  # redelivered meanwhile: the fresh delivery runs the rest
        clock=clock,
    )
    assert (done, acks) == (2, [[0, 1]])


def test_an_unreachable_renewal_goes_on_until_the_lease_ends():
    clock = Clock()

    def listener(message):
        clock.now += 20.0
        return ConsumeResult.SUCCESS

    done = run_orderly_batch(
        [view(0, o) for o in range(5)],
        listener=listener,
        ack=lambda ms: None,
        retry_now=lambda m: None,
        suspend=lambda s: None,
        suspend_s=0,
        stopped=lambda: False,
        lease=BatchLease(clock.now + 60, 60),
        extend=lambda m: None,
        clock=clock,
    )
    assert done == 3  # 0-2 started before 60 s; message 3 would start at 60 s: stop


def test_a_heartbeat_timeout_shorter_than_the_interval_is_refused():
    with pytest.raises(ValueError, match="heartbeat_timeout_s"):
        PushConsumer(
            "http://fake", None, "g", ["t"], lambda m: ConsumeResult.SUCCESS,
            heartbeat_interval_s=30, heartbeat_timeout_s=20,
        )  # fmt: skip


def test_failed_messages_are_nacked_in_batches_not_one_request_each():
    consumer = PushConsumer("http://fake", None, "g", ["t"], lambda m: ConsumeResult.FAILURE)
    requests: list[list[int]] = []
    consumer._consumer.nack_batch = lambda ms, delay=None: (
        requests.append(  # type: ignore[method-assign]
            [m.offset for m in ms]
        )
        or []
    )
    for offset in range(10):
        consumer._retry_later(view(0, offset))
    consumer._acks.put(None)
    consumer._ack_loop()  # the acker's loop, here: it drains the queue and stops
    assert requests == [list(range(10))]
    consumer.shutdown()


def test_a_redrive_by_ids_goes_on_from_next_offset_until_done():
    from cirrusmq.admin.dead_letters import redrive_dead_letters

    answers = iter(
        [
            {"redriven": 0, "skipped": 0, "next_offset": 40, "done": False},
            {"redriven": 1, "skipped": 0, "next_offset": 90, "done": True},
        ]
    )
    sent: list[dict] = []

    def request(method, path, json_body):
        sent.append(json_body)
        return next(answers)

    summary = redrive_dead_letters(
        request, "/v1/groups/g", topic=None, message_ids=["m"], max_messages=None, rate=None
    )
    assert summary.redriven == 1
    assert [b.get("start") for b in sent] == [None, 40]


def test_a_concurrent_consumer_of_a_fifo_topic_is_warned_once(caplog):
    from cirrusmq.consumer.membership import ConsumerInfo, Heartbeater

    info = ConsumerInfo("c", False, 0, 0, {"f": (0, 1), "n": None}, {"f": "*", "n": "*"})
    beater = Heartbeater(None, "g", "c", dict, orderly=False, interval_s=10, timeout_s=120)
    with caplog.at_level("WARNING", logger="cirrusmq.consumer.membership"):
        beater._warn_fifo(info)
        beater._warn_fifo(info)
    warned = [r for r in caplog.records if "orderly=True" in r.getMessage()]
    assert len(warned) == 1 and "f" in warned[0].getMessage()
    orderly = Heartbeater(None, "g", "c", dict, orderly=True, interval_s=10, timeout_s=120)
    caplog.clear()
    orderly._warn_fifo(info)
    assert not caplog.records
