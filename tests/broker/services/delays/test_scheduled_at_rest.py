"""The scheduled functions cost nothing at rest (AWS calls counted on in-process moto): a
delay scheduler run with nothing due within it returns after its first look, the
transaction checker with nothing undecided after one read; a send due before the next run
wakes the scheduler, and a run with something due still moves it on time."""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import boto3
import pytest
from broker_helpers import commit_then_crash
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput, ProducerStamp
from cirrusmq_broker.services.consume_produce import Step
from cirrusmq_broker.services.delays import release
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.delays.invoke import register_local

RUN_SECONDS = 59
API_TIMEOUT_SECONDS = 30  # template.yaml Globals: Function Timeout
FUNCTIONS = Path(__file__).resolve().parents[4] / "functions"


def _table(logical: str) -> str:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    return next(t for t in ddb.list_tables()["TableNames"] if logical in t)


@pytest.fixture
def broker(settings, clock, monkeypatch) -> Broker:
    monkeypatch.setattr(release, "MOVE_WORKERS", 1)  # in-process moto: one thread
    return Broker(
        dataclasses.replace(
            settings,
            timers_table=_table("TimersTable"),
            transactions_table=_table("TransactionsTable"),
        ),
        clock,
    )


SCHEDULER = "scheduler-under-test"


@pytest.fixture
def waking(broker) -> Iterator[Callable[[Callable[[], None]], Broker]]:
    """A container on ``broker``'s tables whose delayed sends wake the scheduler by
    ``start``: the function named in its settings, started in process the way the local
    stack starts one (``register_local``)."""
    undo: list[Callable[[], None]] = []

    def make(start: Callable[[], None]) -> Broker:
        undo.append(register_local(SCHEDULER, start))
        woken = dataclasses.replace(broker.settings, scheduler_function=SCHEDULER)
        return Broker(woken, broker.clock)

    yield make
    for step in reversed(undo):
        step()


@pytest.fixture
def calls() -> Iterator[list[str]]:
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(f"{service}.{operation}"))
    yield seen
    remove()


def run_once(
    broker: Broker, clock, seconds: float = RUN_SECONDS, *, woken: bool = False
) -> release.RunResult:
    """One scheduler invocation on the fake clock (its sleeps move the clock)."""
    deadline = clock.now + int(seconds * 1000)

    def sleep_until(at: int) -> None:
        clock.now = max(clock.now, at)

    return broker.delay_release.run(
        sleep_until=sleep_until, time_left=lambda: (deadline - clock.now) / 1000, woken=woken
    )


def load_handler(name: str, broker: Broker, monkeypatch) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"{name}_app_under_test", FUNCTIONS / name / "app.py"
    )
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    monkeypatch.setattr(app, "current_broker", lambda: broker)
    return app


def test_a_scheduler_run_with_nothing_due_returns_after_its_first_look(broker, clock, calls):
    broker.admin.create_topic("t", queues=1)
    run_once(broker, clock)  # a first run reads the checkpoint (a cold container)
    clock.advance(60)
    calls.clear()
    started = clock.now
    result = run_once(broker, clock)
    assert result.ticks == 1 and clock.now == started  # no sleep: returned at once
    reads = [c for c in calls if c in ("dynamodb.Query", "dynamodb.GetItem", "dynamodb.Scan")]
    # the due minutes from the checkpoint (stragglers) to the end of the run, at most 4
    assert len(reads) <= 4, calls
    assert len(calls) <= 5, calls  # and the checkpoint moving on


def test_a_scheduler_run_with_a_message_due_within_it_moves_it_on_time(broker, clock):
    broker.admin.create_topic("t", queues=1)
    due = clock.now + 30_000
    broker.produce.send("t", [MessageInput(b"a", delivery_timestamp=due)])
    result = run_once(broker, clock)
    assert result.moved == 1 and result.ticks > 1
    assert broker.index.entry_at("t", 0, 0).stored_timestamp == due  # visible when due


def test_a_run_sees_a_message_due_late_in_the_run(broker, clock):
    broker.admin.create_topic("t", queues=1)
    due = clock.now + (RUN_SECONDS - 2) * 1000  # due just before the run ends
    broker.produce.send("t", [MessageInput(b"a", delivery_timestamp=due)])
    assert run_once(broker, clock).moved == 1


def test_a_send_due_before_the_next_run_wakes_the_scheduler_once(broker, clock, waking):
    started: list[int] = []
    broker = waking(lambda: started.append(clock.now))
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"far", delay_level=6)])  # 2 min: a run sees it
    assert started == []
    broker.produce.send("t", [MessageInput(b"soon", delay_level=3)])  # 10 s
    broker.produce.send("t", [MessageInput(b"again", delay_level=4)])  # 30 s: covered
    broker.produce.send("t", [MessageInput(b"now")])  # not delayed
    assert started == [clock.now]
    clock.advance(5)
    covered = [MessageInput(b"x", delivery_timestamp=started[0] + 50_000)]
    broker.produce.send("t", covered)
    assert len(started) == 1
    both = [  # the earlier one is covered, the later one falls due after that run
        MessageInput(b"y", delivery_timestamp=started[0] + 20_000),
        MessageInput(b"z", delivery_timestamp=started[0] + 58_000),
    ]
    broker.produce.send("t", both)
    assert len(started) == 2
    clock.advance(56)
    broker.produce.send("t", [MessageInput(b"later", delay_level=2)])  # past that run
    assert len(started) == 3


def test_a_send_after_a_woken_run_returned_early_is_moved_on_time(broker, clock, waking):
    starts: list[int] = []
    broker = waking(lambda: starts.append(clock.now))
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

    r = broker.delay_release.run(
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


def test_one_minute_of_delayed_sends_from_many_containers_starts_one_run(broker, clock, waking):
    starts: list[int] = []
    broker = waking(lambda: starts.append(clock.now))
    broker.admin.create_topic("t", queues=1)
    containers = [broker] + [Broker(broker.settings, clock) for _ in range(3)]
    t0 = clock.now
    for number, container in enumerate(containers):
        clock.now = t0 + number * 1000  # one send a second, each due 10 s later
        container.produce.send("t", [MessageInput(b"m%d" % number, delay_level=3)])
    # The first woken run (started at t0, working through t0 + 59 s) covers every one of
    # these due times; each further run is another minute-long loop of reads.
    assert len(starts) == 1, f"{len(starts)} scheduler runs started within 3 s"


def test_a_stalled_wake_cannot_outlast_the_send(broker, monkeypatch):
    woken = Broker(dataclasses.replace(broker.settings, scheduler_function="sched"), broker.clock)
    wake = woken.release_wake
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


def test_a_duplicate_of_a_long_past_delayed_send_wakes_nothing(broker, clock, waking):
    starts: list[int] = []
    broker = waking(lambda: starts.append(clock.now))
    broker.admin.create_topic("t", queues=1)
    stamp = ProducerStamp("p1", 1)
    inputs = [MessageInput(b"a", delay_level=3)]  # 10 s
    broker.produce.send("t", inputs, stamp)
    assert len(starts) == 1
    run_once(broker, clock)  # the woken run moves it
    assert broker.index.entry_at("t", 0, 0) is not None
    clock.advance(600)  # ten minutes later the producer's outbox replays the request,
    other = Broker(broker.settings, clock)  # served by another produce container
    assert other.produce.send("t", inputs, stamp).duplicate
    assert len(starts) == 1, "a replay of a send due ten minutes ago started a run"


def test_a_run_started_by_a_wake_answers_it_so_the_next_send_wakes_again(broker, clock, waking):
    starts: list[int] = []
    broker = waking(lambda: starts.append(clock.now))
    broker.admin.create_topic("t", queues=1)
    t0 = clock.now
    broker.produce.send("t", [MessageInput(b"a", delivery_timestamp=t0 + 1000)])
    assert len(starts) == 1
    clock.now = t0 + 1000
    broker.delay_release.tick()  # another run moves it before the woken run starts
    assert broker.index.entry_at("t", 0, 0) is not None
    clock.now = t0 + 1500
    assert run_once(broker, clock, woken=True).ticks == 1  # the woken run: nothing left
    clock.now = t0 + 3000
    due = clock.now + 20_000
    broker.produce.send("t", [MessageInput(b"b", delivery_timestamp=due)])
    assert len(starts) == 2, "the send after the answered wake started no run"
    run_once(broker, clock, woken=True)
    entry = broker.index.entry_at("t", 0, 1)
    assert entry is not None and entry.stored_timestamp == due


def test_a_run_whose_due_times_a_looping_run_covers_returns_at_once(broker, clock):
    broker.admin.create_topic("t", queues=1)
    t0 = clock.now
    broker.produce.send("t", [MessageInput(b"a", delivery_timestamp=t0 + 30_000)])
    assert broker.delay_items.claim_run(t0 + 59_000, unless_covering=t0 + 59_000)  # run R loops
    other = run_once(broker, clock)
    assert other.ticks == 1 and other.moved == 0 and clock.now == t0  # R moves it
    clock.now = t0 + 5000
    broker.produce.send("t", [MessageInput(b"b", delivery_timestamp=t0 + 62_000)])
    late = run_once(broker, clock)  # b falls due after R ends: this run loops itself
    assert late.moved == 2 and late.ticks > 1
    assert broker.delay_items.run_lease().run_until == t0 + 5000 + RUN_SECONDS * 1000


def test_a_wake_that_could_not_start_a_run_lets_the_next_send_ask_again(broker, clock, waking):
    attempts: list[int] = []

    def start() -> None:
        attempts.append(clock.now)
        if len(attempts) == 1:
            raise ConnectionError("the Lambda endpoint did not answer")

    broker = waking(start)
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"a", delay_level=3)])  # the send still succeeds
    clock.advance(2)
    broker.produce.send("t", [MessageInput(b"b", delay_level=3)])
    assert len(attempts) == 2, "the failed wake's ask held back the next send's wake"


def test_the_checker_with_nothing_undecided_returns_after_one_read(broker, calls, monkeypatch):
    app = load_handler("txn_checker", broker, monkeypatch)
    context = types.SimpleNamespace(get_remaining_time_in_millis=lambda: 300_000)
    calls.clear()
    report = app.lambda_handler({"task": "check", "loop_seconds": 55}, context)
    assert set(report.values()) == {0}
    assert calls == ["dynamodb.Scan"]


def test_the_checker_looks_at_an_open_transaction(broker, clock, monkeypatch):
    broker.admin.create_topic("pay", queues=1, message_type="TRANSACTION")
    broker.transactions.register("pg", "p1")
    broker.transactions.send(
        "pg", "tx1", transactional_id="p1", epoch=1, topic_name="pay", inputs=[MessageInput(b"x")]
    )
    assert broker.transactions.any_undecided()
    clock.advance(3600)
    app = load_handler("txn_checker", broker, monkeypatch)
    context = types.SimpleNamespace(get_remaining_time_in_millis=lambda: 300_000)
    assert app.lambda_handler({"task": "check", "loop_seconds": 0}, context)["asked"] == 1


def test_a_failed_wake_withdraws_its_own_ask_not_a_later_sends(broker, clock, waking):
    """A wake's start fails after another container's send (its ask taken as lost, 10 s
    on) asked for a run and started it: the withdrawal removes only the failed ask, so a
    send after that, covered by the started run, starts none."""
    attempts: list[int] = []

    def start() -> None:
        attempts.append(clock.now)
        if len(attempts) == 1:
            clock.advance(11)  # the Lambda endpoint hangs past the ask's pending time
            other.produce.send("t", [MessageInput(b"b", delay_level=3)])  # asks, starts
            raise ConnectionError("the Lambda endpoint did not answer")

    broker = waking(start)
    other = Broker(broker.settings, clock)
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"a", delay_level=3)])  # the send still succeeds
    assert len(attempts) == 2
    clock.advance(1)
    third = Broker(broker.settings, clock)
    third.produce.send("t", [MessageInput(b"c", delay_level=3)])  # the started run covers it
    assert len(attempts) == 2, "the failed wake withdrew the ask of the run that started"


def test_a_retried_step_whose_first_attempt_died_before_its_wake_wakes_the_scheduler(
    broker, clock, waking, monkeypatch
):
    """As a retried send: the first attempt of an exactly-once step committed a delayed
    output due before the next run and died before waking the scheduler; its retry wakes
    it."""
    starts: list[int] = []
    broker = waking(lambda: starts.append(clock.now))
    broker.admin.create_topic("in", queues=1)
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("in", [MessageInput(b"order")])
    (got,) = broker.consume.receive("g", "in", max_messages=1, invisible_seconds=30)
    request = Step(
        producer_group="pg",
        transactional_id="stage-1",
        epoch=broker.transactions.register("pg", "stage-1"),
        sequence=0,
        group="g",
        receipt_handles=(got.receipt_handle,),
        outputs=(("t", (MessageInput(b"soon", delay_level=3),)),),  # due in 10 s
    )
    commit_then_crash(monkeypatch, broker, request)
    assert starts == []

    assert broker.consume_produce.commit(request).duplicate
    assert starts == [clock.now]
