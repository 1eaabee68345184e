"""Review of the one append path, the scheduler's early return and its wake: scenarios
that lose on-time delivery or break an invariant (each xfail until fixed)."""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import ProducerStamp
from cirrusmq_broker.services import scheduler
from cirrusmq_broker.services.produce import MessageInput
from cirrusmq_broker.services.scheduler_wake import SchedulerWake

RUN_SECONDS = 59


def _table(logical: str) -> str:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    return next(t for t in ddb.list_tables()["TableNames"] if logical in t)


@pytest.fixture
def broker(settings, clock, monkeypatch) -> Broker:
    monkeypatch.setattr(scheduler, "MOVE_WORKERS", 1)  # in-process moto: one thread
    return Broker(
        dataclasses.replace(
            settings,
            timers_table=_table("TimersTable"),
            transactions_table=_table("TransactionsTable"),
        ),
        clock,
    )


def run_once(broker: Broker, clock, seconds: float = RUN_SECONDS) -> scheduler.RunResult:
    """One scheduler invocation on the fake clock (its sleeps move the clock)."""
    deadline = clock.now + int(seconds * 1000)

    def sleep_until(at: int) -> None:
        clock.now = max(clock.now, at)

    return broker.scheduler.run(
        sleep_until=sleep_until, time_left=lambda: (deadline - clock.now) / 1000
    )


@pytest.mark.xfail(
    strict=True,
    reason="a woken run that finds nothing due (another run moved its message first) "
    "returns at once, yet the wake counts it as covering the next 55 s: a later send due "
    "within that time wakes nothing and waits up to a minute for the next scheduled run",
)
def test_a_send_after_a_woken_run_returned_early_is_moved_on_time(broker, clock, monkeypatch):
    starts: list[int] = []
    monkeypatch.setattr(
        broker.produce, "_wake", SchedulerWake(lambda: starts.append(clock.now), clock)
    )
    broker.admin.create_topic("t", queues=1)
    t0 = clock.now
    broker.produce.send("t", [MessageInput(b"early", delivery_timestamp=t0 + 8_000)])
    assert len(starts) == 1
    late_send = {"done": False}

    def during_run(at: int) -> None:
        # Near the end of run R (woken at t0, looping since "early" was due), a send of a
        # message due 200 ms later wakes another run W; R moves it before W starts.
        if at >= t0 + 58_000 and not late_send["done"]:
            late_send["done"] = True
            broker.produce.send("t", [MessageInput(b"m1", delivery_timestamp=clock.now + 200)])

    deadline = t0 + RUN_SECONDS * 1000

    def sleep_until(at: int) -> None:
        during_run(at)
        clock.now = max(clock.now, at)

    r = broker.scheduler.run(
        sleep_until=sleep_until, time_left=lambda: (deadline - clock.now) / 1000
    )
    assert r.moved == 2 and len(starts) == 2  # R moved both; W was asked for at ~t0+58 s
    clock.now = deadline + 300  # W's Lambda starts (asynchronous invoke): nothing left
    assert run_once(broker, clock).ticks == 1
    clock.now = t0 + 60_000  # the next scheduled run: nothing due, returns at once
    assert run_once(broker, clock).ticks == 1
    clock.now = t0 + 70_000
    due = clock.now + 10_000  # due long before the scheduled run at t0 + 120 s
    broker.produce.send("t", [MessageInput(b"m2", delivery_timestamp=due)])
    for _ in starts[2:]:  # any run woken for it (it starts after the send)
        run_once(broker, clock)
    entry = broker.index.entry_at("t", 0, 2)
    assert entry is not None, "no run moved the message within a second of its due time"
    assert entry.base_offset == 2 and entry.stored_timestamp == due


@pytest.mark.xfail(
    strict=True,
    reason="the wake's coverage is per process: every produce container that sends a "
    "message due within the minute starts its own scheduler run, and each works through "
    "its whole 59 s (N concurrent polling loops where one suffices)",
)
def test_one_minute_of_delayed_sends_from_many_containers_starts_one_run(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    containers = [broker] + [Broker(broker.settings, clock) for _ in range(3)]
    starts: list[int] = []
    for container in containers:
        monkeypatch.setattr(
            container.produce, "_wake", SchedulerWake(lambda: starts.append(clock.now), clock)
        )
    t0 = clock.now
    for number, container in enumerate(containers):
        clock.now = t0 + number * 1000  # one send a second, each due 10 s later
        container.produce.send("t", [MessageInput(b"m%d" % number, delay_level=3)])
    # The first woken run (started at t0, working through t0 + 59 s) covers every one of
    # these due times; each further run is another minute-long loop of reads.
    assert len(starts) == 1, f"{len(starts)} scheduler runs started within 3 s"


API_TIMEOUT_SECONDS = 30  # template.yaml Globals: Function Timeout


@pytest.mark.xfail(
    strict=True,
    reason="the wake's Lambda invoke runs inline on the send path with botocore's default "
    "60 s connect and read timeouts and 4 attempts: a stalled Lambda endpoint holds a "
    "committed send past the API function's 30 s timeout (a 5xx; an unstamped retry "
    "stores the messages twice)",
)
def test_a_stalled_wake_cannot_outlast_the_send(broker, monkeypatch):
    woken = Broker(dataclasses.replace(broker.settings, scheduler_function="sched"), broker.clock)
    wake = woken.scheduler_wake
    assert wake is not None
    client = wake._start._client()  # the Lambda client FunctionStarter invokes through
    config = client.meta.config
    retries = config.retries or {}
    attempts = retries.get("total_max_attempts") or retries.get("max_attempts") or 1
    worst = (config.connect_timeout + config.read_timeout) * attempts
    assert worst <= API_TIMEOUT_SECONDS / 3, (
        f"a wake may block the send {worst} s ({attempts} attempts of "
        f"{config.connect_timeout} + {config.read_timeout} s)"
    )


@pytest.mark.xfail(
    strict=True,
    reason="a retried (duplicate) delayed send wakes the scheduler for due times long past: "
    "minutes-old dues were already seen by the scheduled runs, so each replay (e.g. an "
    "outbox flush) costs an invoke and a scheduler run for nothing",
)
def test_a_duplicate_of_a_long_past_delayed_send_wakes_nothing(broker, clock, monkeypatch):
    starts: list[int] = []
    monkeypatch.setattr(
        broker.produce, "_wake", SchedulerWake(lambda: starts.append(clock.now), clock)
    )
    broker.admin.create_topic("t", queues=1)
    stamp = ProducerStamp("p1", 1)
    inputs = [MessageInput(b"a", delay_level=3)]  # 10 s
    broker.produce.send("t", inputs, stamp)
    assert len(starts) == 1
    run_once(broker, clock)  # the woken run moves it
    assert broker.index.entry_at("t", 0, 0) is not None
    clock.advance(600)  # ten minutes later the producer's outbox replays the request,
    other = Broker(broker.settings, clock)  # served by another produce container
    monkeypatch.setattr(
        other.produce, "_wake", SchedulerWake(lambda: starts.append(clock.now), clock)
    )
    assert other.produce.send("t", inputs, stamp).duplicate
    assert len(starts) == 1, "a replay of a send due ten minutes ago started a run"
