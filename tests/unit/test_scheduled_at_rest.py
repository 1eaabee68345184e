"""The scheduled functions cost nothing at rest (AWS calls counted on in-process moto): a
delay scheduler run with nothing due within it returns after its first look, the
transaction checker with nothing undecided after one read; a send due before the next run
wakes the scheduler, and a run with something due still moves it on time."""

from __future__ import annotations

import dataclasses
import importlib.util
import types
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from cirrusmq_broker.container import Broker
from cirrusmq_broker.services import scheduler
from cirrusmq_broker.services.produce import MessageInput
from cirrusmq_broker.services.scheduler_wake import SchedulerWake
from cirrusmq_broker.storage.clients import observe_calls

RUN_SECONDS = 59
FUNCTIONS = Path(__file__).resolve().parents[2] / "functions"


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


@pytest.fixture
def calls() -> Iterator[list[str]]:
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(f"{service}.{operation}"))
    yield seen
    remove()


def run_once(broker: Broker, clock) -> scheduler.RunResult:
    """One scheduler invocation of RUN_SECONDS on the fake clock (sleeps move it)."""
    deadline = clock.now + RUN_SECONDS * 1000

    def sleep_until(at: int) -> None:
        clock.now = max(clock.now, at)

    return broker.scheduler.run(
        sleep_until=sleep_until, time_left=lambda: (deadline - clock.now) / 1000
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


def test_a_send_due_before_the_next_run_wakes_the_scheduler_once(broker, clock, monkeypatch):
    started: list[int] = []
    wake = SchedulerWake(lambda: started.append(clock.now), clock)
    monkeypatch.setattr(broker.produce, "_wake", wake)
    broker.admin.create_topic("t", queues=1)
    broker.produce.send("t", [MessageInput(b"far", delay_level=6)])  # 2 min: a run sees it
    assert started == []
    broker.produce.send("t", [MessageInput(b"soon", delay_level=3)])  # 10 s
    broker.produce.send("t", [MessageInput(b"again", delay_level=4)])  # 30 s: covered
    broker.produce.send("t", [MessageInput(b"now", b"")])  # not delayed
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
