"""The soak's pipeline ledger (``soak_pipeline.py``): a second stored copy of one input is a
duplicate, a sent order with no copy at the end (or never acked by the sink) is lost; and
against a local stack, a stage that acks and sends as two calls, dying between them, is
caught, while the exactly-once stages under the same crashes count neither."""

from __future__ import annotations

import uuid

import pytest
from cirrusmq.testing import LocalStack
from soak import Soak
from soak_pipeline import PipelineDriver, PipelineLedger
from soak_run import Run


def through(book: PipelineLedger, order: str, *, s1: int = 1, s2: int = 1) -> None:
    """``order`` sent as ``m-order`` and stored ``s1`` / ``s2`` times downstream."""
    book.record_sent(order, f"m-{order}")
    book.stored["s0"].append((f"m-{order}", order, ""))
    for n in range(s1):
        book.stored["s1"].append((f"a{n}-{order}", order, f"m-{order}"))
    for n in range(s2):
        book.stored["s2"].append((f"b{n}-{order}", order, f"a0-{order}"))
    if s2:
        book.record_sink(order)


def test_each_order_stored_once_per_stage_and_acked_by_the_sink_is_neither_lost_nor_duplicated():
    book = PipelineLedger()
    through(book, "o1")
    through(book, "o2")
    verdict = book.judge()
    assert (verdict.sent, verdict.stage1, verdict.stage2, verdict.acked) == (2, 2, 2, 2)
    assert (verdict.lost, verdict.duplicate) == (0, 0) and verdict.ok
    assert verdict.line() == (
        "sent 2, stage1 2, stage2 2, sink 2, lost 0, duplicated 0, dead-lettered 0"
    )


def test_two_stored_copies_of_one_input_are_a_duplicate_even_if_the_sink_saw_one():
    book = PipelineLedger()
    through(book, "o1", s1=2)
    through(book, "o2", s2=3)
    verdict = book.judge()
    assert (verdict.lost, verdict.duplicate) == (0, 3)
    assert verdict.examples["pipeline duplicated"] == ["s1 from m-o1 x2", "s2 from a0-o2 x3"]


def test_an_order_missing_downstream_or_not_acked_by_the_sink_is_lost():
    book = PipelineLedger()
    through(book, "o1", s1=0, s2=0)
    through(book, "o2")
    book.sink_acked.discard("o2")
    verdict = book.judge()
    assert verdict.lost == 2 and not verdict.ok
    assert verdict.examples["pipeline lost"] == ["o1 (none in s1)", "o2 (not acked by the sink)"]


@pytest.fixture(scope="module")
def stack():
    with LocalStack(host="127.0.0.1") as local:
        yield local


def soak_pipeline(stack, broken: str | None):
    run = Run(stack.endpoint, stack.credentials, stack, uuid.uuid4().hex[:6], 60)
    soak = Soak(run, [], 2)
    driver = PipelineDriver(run, broken=broken)
    soak.drivers = [driver]
    soak.run_all()
    return driver.ledger.judge()


def test_a_stage_acking_then_sending_that_dies_between_loses_orders_in_its_output(stack):
    verdict = soak_pipeline(stack, "ack-then-send")
    assert verdict.lost > 0 and verdict.duplicate == 0
    lost = verdict.examples["pipeline lost"]
    assert all(text.endswith("(none in s1)") for text in lost), lost
    assert verdict.stage1 == verdict.sent - verdict.lost


def test_a_stage_sending_then_acking_that_dies_between_stores_two_copies_of_an_order(stack):
    verdict = soak_pipeline(stack, "send-then-ack")
    assert verdict.duplicate > 0 and verdict.lost == 0, verdict.examples
    duplicated = verdict.examples["pipeline duplicated"]
    assert all(text.startswith("s1 from ") for text in duplicated), duplicated


def test_exactly_once_stages_under_the_same_crashes_lose_and_duplicate_nothing(stack):
    verdict = soak_pipeline(stack, None)
    assert verdict.sent > 0
    assert (verdict.lost, verdict.duplicate, verdict.unsent) == (0, 0, 0), verdict.examples
