"""The model's judgement against a broker with one guard removed in-process: each history
must raise the violation the missing guard lets through (a model that stays clean there
would pass the same defect in a search), and the same history on the broker as it is must
pass."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from cirrusmq_broker.model import ReceivedMessage
from cirrusmq_broker.rules.retries import as_original
from cirrusmq_broker.services.delivery.ack import Acks
from cirrusmq_broker.services.delivery.invisible import InvisibleTime
from cirrusmq_broker.services.receipt_handles import AckOutcome, AckStatus
from cirrusmq_broker.storage import group_offsets
from cirrusmq_broker.storage.producers import ProducerRecords
from cirrusmq_broker.storage.redrive_claims import RedriveClaimStore
from cirrusmq_broker.storage.transactions import TransactionStore
from machine import ReliabilityMachine
from model import Violation
from rulesets import narrowed
from test_model_histories import copy_back, dead_letter_m1_of_g1, redriven_copy_of_m4
from world import Backend

pytestmark = pytest.mark.reliability

SQS_RULES = "sqs_send,sqs_receive,sqs_purge,sqs_wait,tick"


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)
    Backend.stop()


def replay(steps: Callable[[ReliabilityMachine], None], rules: str = SQS_RULES) -> None:
    """Run ``steps`` on a new history of ``rules``, then bring it to rest."""
    machine = narrowed(ReliabilityMachine, rules)()
    try:
        steps(machine)
    except BaseException:
        machine.world.close()
        raise
    machine.teardown()


def without_deduplication_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``dedup-window`` mutant of mutants.py: a deduplicating record is replaced
    whatever its age, so a repeat within the window is stored again under a new id."""
    original = ProducerRecords.put_request

    def put_request(self: ProducerRecords, *args: Any, **kwargs: Any) -> dict[str, Any]:
        request = original(self, *args, **kwargs)
        put = request["Put"]
        if "ExpressionAttributeValues" in put:  # a deduplicating record
            put["ConditionExpression"] += " OR attribute_exists(producer_key)"
        return request

    monkeypatch.setattr(ProducerRecords, "put_request", put_request)


def repeat_within_window(m: ReliabilityMachine) -> None:
    m.sqs_send(0, 0, 0)  # pf.fifo q1, dedup d0
    m.sqs_wait(31)
    m.sqs_send(1, 0, 0)  # pf.fifo q2, dedup d0 again, 31 s later
    m.sqs_receive(0, 0)


def test_a_fifo_repeat_within_the_deduplication_window_answers_the_first_send() -> None:
    replay(repeat_within_window)


def test_a_fifo_repeat_within_the_window_stored_again_is_stored_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_deduplication_window(monkeypatch)
    with pytest.raises(Violation, match="stored-twice"):
        replay(repeat_within_window)


def test_a_fifo_repeat_after_the_deduplication_window_is_a_new_message() -> None:
    def steps(m: ReliabilityMachine) -> None:
        m.sqs_send(0, 0, 0)  # pf.fifo q1, dedup d0
        for _ in range(10):
            m.sqs_wait(31)  # 310 s: past the 5 minutes
        m.sqs_send(1, 0, 0)  # pf.fifo q2, dedup d0: a new message
        m.sqs_receive(0, 0)
        assert m.log[-1].endswith("-> ok ['q1', 'q2']"), m.log[-1]

    replay(steps)


COMMIT_RULES = "send,receive,ack,txn_send,commit,rollback,race_at_commit"


def without_transaction_state_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``txn-state-fence`` mutant of mutants.py: a transition lands whatever the
    transaction's state, so a commit and a rollback that both read it OPEN both land."""
    original = TransactionStore._write

    def write(self: TransactionStore, update: dict[str, Any], **kwargs: Any) -> Any:
        if update.get("ConditionExpression", "").startswith("#state IN"):
            update = {**update, "ConditionExpression": (
                f"({update['ConditionExpression']}) OR attribute_exists(#state)"
            )}  # fmt: skip
        return original(self, update, **kwargs)

    monkeypatch.setattr(TransactionStore, "_write", write)


def commit_inside_rollback(m: ReliabilityMachine) -> None:
    m.start_with_messages_in_flight(0, 0, 0)
    m.race_at_commit(0, ("rollback", "commit"), 1, 0, 1, 0)  # t1: a part, then the race


def test_a_commit_inside_a_rollback_leaves_the_rollback_refused() -> None:
    replay(commit_inside_rollback, COMMIT_RULES)


def test_a_rollback_landing_after_its_commit_answered_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    without_transaction_state_fence(monkeypatch)
    with pytest.raises(Violation, match="rolled-back-visible"):
        replay(commit_inside_rollback, COMMIT_RULES)


STEP_RESET_RULES = "send,receive,ack,advance,step,race_at_reset"
RACE_REDRIVE_RULES = "send,receive,ack,advance,tick,redrive,redrive_id,race_at_write"


def without_retry_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """A retry delivery shown without the deliveries before it: it counts from 1 again."""

    def present(received: ReceivedMessage) -> ReceivedMessage:
        return replace(received, message=as_original(received.message))

    where = "cirrusmq_broker.services.retries.retry_topic.RetryTopic.present"
    monkeypatch.setattr(where, staticmethod(present))


def retry_of_a_rewound_queue_inside_reset(m: ReliabilityMachine) -> None:
    """g2's only expired lease is m11's, stored at queue 0; a reset of g2 on n to earliest
    writes queue 0 and pauses before queue 1, and a receive in between gets m11 twice:
    read anew from the rewound queue 0 (attempt 1) and from g2's retry topic (attempt 2)."""
    m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
    g2 = m.groups["g2"]
    live = [d for _, d in m._live(stale_too=False)]
    m.step(0, live.index(g2.deliveries[0]), 0, None)  # acks m1, sends m11 to queue 0
    m._run(0, None, m._ack_op("g2", [g2.latest[b"m2"]]))
    m._run(0, None, m._receive_op("g2", "n", 4, 10))
    assert m.log[-1] == "[0] receive g2 n max 4 invisible 10s -> ok ['m3#1', 'm11#1']"
    assert g2.latest[b"m11"].copy[2] == 0  # stored at queue 0
    m._run(0, None, m._ack_op("g2", [g2.latest[b"m3"]]))
    m.clock.advance(11)  # past m11's lease
    m._run(0, None, m._receive_op("g2", "n", 1, 30))  # moves m11 to the retry topic
    m.clock.advance(11)  # past its backoff
    m.race_at_reset(0, 1, 4, 1)
    inside = next(line for line in m.log if "(while [0] reset g2 n to earliest" in line)
    assert "'m11#1'" in inside, inside


def test_a_retry_of_a_message_of_a_rewound_queue_inside_a_reset_counts_on() -> None:
    random.seed(0)  # where sends and receives start their rotation of queues: m11 at queue 0

    def steps(m: ReliabilityMachine) -> None:
        retry_of_a_rewound_queue_inside_reset(m)
        assert "'m11#2'" in next(line for line in m.log if "(while [0] reset" in line)

    replay(steps, STEP_RESET_RULES)


def test_a_retry_not_counted_inside_a_reset_is_caught_on_a_rewound_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the reset rewound starts over; its retry topic does not: a retry of m11 that
    counts from 1 again is a redelivery that did not count its attempt."""
    random.seed(0)
    without_retry_count(monkeypatch)
    with pytest.raises(Violation, match="attempt-not-counted(.|\n)*got b'm11' attempt 1"):
        replay(retry_of_a_rewound_queue_inside_reset, STEP_RESET_RULES)


def without_redrive_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``redrive-claim`` mutant of mutants.py: a redrive claims its letters whatever was
    claimed since it read the claims, so two redrives may both send a letter back."""
    original = RedriveClaimStore.claim_request

    def claim_request(self: RedriveClaimStore, *args: Any, **kwargs: Any) -> dict[str, Any]:
        update = original(self, *args, **kwargs)["Update"]
        update.pop("ConditionExpression")
        update["ExpressionAttributeValues"].pop(":read", None)
        return {"Update": update}

    monkeypatch.setattr(RedriveClaimStore, "claim_request", claim_request)


def redrive_by_id_inside_cursor_redrive(m: ReliabilityMachine) -> None:
    """g1 lets m1 and m2 run out into its DLQ; a redrive by cursor, paused before its
    append (the model grants its letters while it is paused), while a redrive of m1 by id
    sends m1 back; then g1 (a redrive reaches only its group) receives what came back."""
    m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
    dead_letter_m1_of_g1(m)
    cursor, by_id = m._redrive_op("g1", None), m._redrive_op("g1", b"m1")
    m._interleave(0, cursor, 0, by_id, before=("TransactWriteItems", 0))
    m.check_every_step()
    m._run(1, None, m._receive_op("g1", "n", 8, 10))
    m.check_every_step()


def test_a_letter_granted_by_a_paused_redrive_and_another_comes_back_once() -> None:
    random.seed(0)
    replay(redrive_by_id_inside_cursor_redrive, RACE_REDRIVE_RULES)


def test_a_letter_sent_back_by_two_redrives_is_caught_with_a_paused_grant(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The paused redrive's grant and the other's are one copy of the letter, not two: a
    second copy of m1 in g1's retry topic (the same origin, so the same copy to the model)
    comes back at attempt 1 again."""
    random.seed(0)
    without_redrive_claim(monkeypatch)
    duplicate = "(redrive-duplicate|attempt-not-counted)(.|\\n)*got b'm1' attempt 1"
    with pytest.raises(Violation, match=duplicate):
        replay(redrive_by_id_inside_cursor_redrive, RACE_REDRIVE_RULES)


RESET_RULES = "send,receive,ack,advance,race_at_reset"


def without_offset_reset_fence(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``offset-reset-fence`` mutant of mutants.py: a reset (and a drop of leases)
    writes the summary whatever its version, so a lease saved after its read stays."""
    monkeypatch.setattr(
        group_offsets,
        "_version_condition",
        lambda version: ("attribute_not_exists(group_name) OR attribute_exists(group_name)", {}),
    )


def receive_inside_reset_then_ack(m: ReliabilityMachine) -> None:
    m.start_with_messages_in_flight(0, 0, 0)
    m.race_at_reset(0, 0, 4, 1)  # g1 n to earliest; a receive of g1 n inside it, its ack


def test_a_receive_inside_an_offset_reset_leaves_no_lease_to_ack() -> None:
    replay(receive_inside_reset_then_ack, RESET_RULES)


def test_a_lease_surviving_an_offset_reset_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    without_offset_reset_fence(monkeypatch)
    with pytest.raises(Violation, match="reset-handle-acked"):
        replay(receive_inside_reset_then_ack, RESET_RULES)


COPY_RULES = "receive,ack,nack,change_invisible,redrive_id,dead_letter,advance"


def with_changes_answering_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A change of invisible time that answers a deadline 10 minutes later than it stored:
    the message comes back (after its retry backoff) before the deadline its answer
    promised."""
    original = InvisibleTime.change_invisible

    def change_invisible(self: InvisibleTime, *args: Any, **kwargs: Any) -> Any:
        received = original(self, *args, **kwargs)
        return replace(received, invisible_until=received.invisible_until + 600_000)

    monkeypatch.setattr(InvisibleTime, "change_invisible", change_invisible)


def with_acks_landing_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ack that answers ``acked`` for every handle and writes nothing: the message comes
    back once its lease ends."""

    def ack(self: Acks, group: str, receipt_handles: list[str], *_: Any, **__: Any) -> Any:
        return [AckOutcome(handle, AckStatus.ACKED) for handle in receipt_handles]

    monkeypatch.setattr(Acks, "ack", ack)


def copy_changed_then_received(m: ReliabilityMachine) -> None:
    """A redriven copy of m4 (30 s) shortened to 10 s, received again once back."""
    copy = redriven_copy_of_m4(m)
    m._run(0, None, m._op_change_invisible(copy, 0))
    copy_back(m)


def copy_changed_acked_then_received(m: ReliabilityMachine) -> None:
    """A redriven copy of m4 shortened to 10 s, acked through the new handle, then
    received four times 11 s apart (past its retry backoff)."""
    copy = redriven_copy_of_m4(m)
    m._run(0, None, m._op_change_invisible(copy, 0))
    m._run(1, None, m._ack_op("g1", [m.groups["g1"].latest[b"m4"]]))
    for _ in range(4):
        m.clock.advance(11)
        m._run(0, None, m._op_tick(0, 0))
        m._run(0, None, m._receive_op("g1", "f", 2, 30))


def test_a_redriven_copy_comes_back_when_its_changed_invisible_time_ends() -> None:
    replay(copy_changed_then_received, COPY_RULES)


def test_a_redriven_copy_back_before_its_changed_invisible_time_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_changes_answering_longer(monkeypatch)
    with pytest.raises(Violation, match="redelivered-while-invisible"):
        replay(copy_changed_then_received, COPY_RULES)


def test_a_redriven_copy_acked_through_its_changed_handle_stays_acked() -> None:
    replay(copy_changed_acked_then_received, COPY_RULES)


def test_a_redriven_copy_back_after_its_ack_through_a_changed_handle_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_acks_landing_nothing(monkeypatch)
    with pytest.raises(Violation, match="acked-redelivered"):
        replay(copy_changed_acked_then_received, COPY_RULES)


def _ack_answers_500(*_: object, **__: object) -> None:
    raise RuntimeError("an internal error: the API answers 500")


@pytest.mark.parametrize("inside_a_pause", [False, True])
def test_an_ack_failing_with_an_internal_error_is_judged_so(inside_a_pause: bool) -> None:
    """An ack that fails with an error the broker does not answer as its own (a 500) is an
    internal-error, whether the plain ``ack`` rule or ``stale_receive`` (inside another
    receive's pause) made it."""
    m = narrowed(ReliabilityMachine, "send,receive,ack,advance,stale_receive")()
    try:
        m._run(0, None, m._op_send(1, 0))
        m._run(0, None, m._op_send(1, 0))
        m.world.brokers[1].consume.ack = _ack_answers_500
        with pytest.raises(Violation, match="internal-error"):
            if inside_a_pause:
                m.stale_receive(0, 0, 0, 0)  # g1 n: [1] receives and acks in [0]'s pause
            else:
                m._run(1, None, m._receive_op("g1", "n", 4, 30))
                m.ack(1, 0, 0, None)
    finally:
        m.world.close()
