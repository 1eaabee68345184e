"""The back-checker's runs (in-process moto, a fake clock): a check is asked when it falls
due, not a minute later; a half send due before the next scheduled run starts one run; a
run covered by another's lease returns after its first pass."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import boto3
import pytest
from cirrusmq_broker.container import Broker
from cirrusmq_broker.model import MessageInput
from cirrusmq_broker.rules.transaction_state import CheckTimings
from cirrusmq_broker.services.transactions import CheckReport
from cirrusmq_broker.storage.delays.invoke import register_local
from cirrusmq_broker.storage.transactions import TransactionStore

RUN_SECONDS = 59
CHECKER = "checker-under-test"


@pytest.fixture
def broker(settings, clock) -> Broker:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    table = next(t for t in ddb.list_tables()["TableNames"] if "TransactionsTable" in t)
    return Broker(dataclasses.replace(settings, transactions_table=table), clock)


@pytest.fixture
def waking(broker) -> Iterator[Callable[[Callable[[], None]], Broker]]:
    """A container whose half sends start the checker by ``start`` (as the local stack
    starts a function: ``register_local``)."""
    undo: list[Callable[[], None]] = []

    def make(start: Callable[[], None]) -> Broker:
        undo.append(register_local(CHECKER, start))
        woken = dataclasses.replace(broker.settings, txn_checker_function=CHECKER)
        return Broker(woken, broker.clock)

    yield make
    for step in reversed(undo):
        step()


def open_transaction(broker: Broker, transaction_id: str, immunity_seconds: int) -> None:
    broker.transactions.send(
        "pg",
        transaction_id,
        transactional_id="p1",
        epoch=1,
        topic_name="pay",
        inputs=[MessageInput(b"x")],
        timings=CheckTimings(immunity_seconds=immunity_seconds),
    )


def run_once(broker: Broker, clock, wakes: list[int] | None = None) -> CheckReport:
    """One checker invocation on the fake clock (its sleeps move the clock)."""
    deadline = clock.now + RUN_SECONDS * 1000

    def sleep_until(at: int) -> None:
        if wakes is not None:
            wakes.append(at)
        clock.now = max(clock.now, at)

    return broker.transactions.run(
        sleep_until=sleep_until, time_left=lambda: (deadline - clock.now) / 1000
    )


def setup(broker: Broker) -> None:
    broker.admin.create_topic("pay", queues=1, message_type="TRANSACTION")
    broker.transactions.register("pg", "p1")


def test_a_run_asks_each_check_when_it_falls_due(broker, clock):
    setup(broker)
    start = clock.now
    open_transaction(broker, "tx1", immunity_seconds=10)
    wakes: list[int] = []
    report = run_once(broker, clock, wakes)
    # asked at the end of its immunity and again 30 s later (the check interval)
    assert report.asked == 2
    assert start + 10_000 in wakes and start + 40_000 in wakes


def test_a_run_with_nothing_due_within_it_returns_after_its_first_pass(broker, clock):
    setup(broker)
    open_transaction(broker, "tx1", immunity_seconds=300)
    started = clock.now
    assert run_once(broker, clock) == CheckReport()
    assert clock.now == started  # no sleep


def test_a_run_covered_by_a_looping_run_returns_after_its_first_pass(broker, clock):
    setup(broker)
    open_transaction(broker, "tx1", immunity_seconds=30)
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    runs = TransactionStore(ddb, broker.settings.transactions_table).runs
    assert runs.claim_run(clock.now + RUN_SECONDS * 1000, unless_covering=0)  # one loops
    started = clock.now
    assert run_once(broker, clock) == CheckReport()
    assert clock.now == started  # no sleep: the looping run asks it


def test_half_sends_due_before_the_next_run_start_one_checker_run(broker, clock, waking):
    starts: list[int] = []
    broker = waking(lambda: starts.append(clock.now))
    setup(broker)
    open_transaction(broker, "tx1", immunity_seconds=10)
    open_transaction(broker, "tx2", immunity_seconds=10)
    assert len(starts) == 1  # the second sees the first one's ask pending
    open_transaction(broker, "tx3", immunity_seconds=300)  # the minute's runs see it
    assert len(starts) == 1
