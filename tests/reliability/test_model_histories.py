"""Histories the model-based search (machine.py) once reported, replayed step by step: each
broke an invariant through a defect of the broker or of the model, and must now pass."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator

import pytest
from faults import Fault
from machine import ReliabilityMachine
from model import Msg, Violation
from rulesets import narrowed
from world import Backend

pytestmark = pytest.mark.reliability


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    logging.disable(logging.CRITICAL)  # the broker logs the injected faults it survives
    yield
    logging.disable(logging.NOTSET)
    Backend.stop()


def replay(
    steps: Callable[[ReliabilityMachine], None], machine_type: type = ReliabilityMachine
) -> None:
    """Run ``steps`` on a new history, then bring it to rest; a Violation fails the test."""
    machine = machine_type()
    try:
        steps(machine)
    except BaseException:
        machine.world.close()
        raise
    machine.teardown()


def test_a_commit_after_two_failed_part_sends_requires_neither_part() -> None:
    """Part 0 and then part 1 of a transaction fail (the process dies before the write);
    part 1 is resent, the commit answers ok: part 0 was never stored, so its message is
    not required (it is once its resend, at rest, answers ok)."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)
        m.txn_send(0, 1, 0, Fault(1, "crash"))  # t2 part 0: before TransactWriteItems
        m.txn_send(0, 1, 1, Fault(2, "crash"))  # t2 part 1: before PutObject
        m.txn_send(0, 1, 2, None)  # part 1 resent
        m.commit(0, 1, None)
        assert m.log[-4].endswith(
            "part 0 ['m11'] !crash before dynamodb:TransactWriteItems -> crash None"
        )
        assert m.log[-3].endswith("!crash before s3:PutObject -> crash None")
        assert m.log[-2].startswith("[0] txn send t2 part 1") and m.log[-2].endswith(
            "ok duplicate=False"
        )
        assert m.log[-1] == "[0] commit t2 -> ok changed=True"

    replay(steps)


def test_a_fifo_message_after_a_dead_lettering_nack_is_in_order() -> None:
    """m5, the last attempt, is nacked (to the DLQ) while a receive paused at its AWS call;
    the receive then delivers m6, the next of the message group. The observer had listed
    the group's DLQ before it existed: it must list m5 now, so m6 is in order."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 1)  # g1 got m4#1, m5#1 of FIFO group k0
        m.check_every_step()
        m4, m5 = (d for d in m.groups["g1"].deliveries if d.topic == "f")
        m._run(1, None, m._ack_op("g1", [m4]))
        m.check_every_step()
        m.clock.advance(11)  # past the lease of m5
        m._run(0, None, m._receive_op("g1", "f", 1, 30))
        m.check_every_step()
        latest = m.groups["g1"].latest[m5.body]
        nack = m._op_nack([d for _, d in m._live(stale_too=False)].index(latest), 0)
        m._interleave(0, m._receive_op("g1", "f", 1, 10), 1, nack)
        assert m.log[-2:] == [
            "[1] nack g1 m5#2 (while [0] receive g1 f max 1 invisible 10s paused before "
            "call 1) -> ok ['acked']",
            "[0] receive g1 f max 1 invisible 10s (paused before call 1) -> ok ['m6#1']",
        ]
        m.check_every_step()

    replay(steps)


def test_a_redrive_by_id_whose_answer_was_lost_is_retried() -> None:
    """A redrive by id fails before it sends anything back (the answer of its first read
    is lost); the client retries it, so at rest the letter is back and acked."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 1)  # g1 got m4#1, m5#1 of FIFO group k0
        m4, m5 = (d for d in m.groups["g1"].deliveries if d.topic == "f")
        m._run(1, None, m._ack_op("g1", [m4]))
        m.clock.advance(11)  # past the lease of m5
        m._run(0, None, m._receive_op("g1", "f", 1, 30))  # m5#2, its last attempt
        m.nack(
            0, [d for _, d in m._live(stale_too=False)].index(m.groups["g1"].latest[m5.body]), None
        )
        m.check_every_step()
        assert set(m.groups["g1"].letter_bodies.values()) == {b"m5"}
        m.redrive_id(0, 0, 0, Fault(0, "lost"))
        assert m.log[-1] == (
            "[0] redrive g1 by id m5 !answer lost after dynamodb:GetItem -> error "
            "StorageUnavailable('injected: the answer of dynamodb:GetItem was lost')"
        )

    replay(steps)


def test_a_redriven_copy_acked_leaves_the_groups_own_copy_to_deliver() -> None:
    """g1 dead-letters m1 and redrives it: the copy is appended to topic n, so g2 (which
    let its own lease of m1 expire, into its retry topic) gets the copy as well. g2
    receives the copy (attempt 1) and acks it: ``acked`` settles that copy only, so its
    own copy of m1, from the retry topic, is still delivered once more."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g1, g2 = m.groups["g1"], m.groups["g2"]
        while b"m1" not in g1.dead:  # g1 has two attempts: m1 goes to its DLQ
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g1", "n", 4, 10))
            m.check_every_step()
        m._run(1, None, m._redrive_op("g1", b"m1"))
        assert m.log[-1] == "[1] redrive g1 by id m1 -> ok redriven=1"
        while not (copy := [d for d in g2.deliveries if d.via_allowance]):
            m._run(0, None, m._receive_op("g2", "n", 4, 50))
            m.check_every_step()
            m.clock.advance(11)
        assert copy[0].body == b"m1" and copy[0].attempt == 1
        m._run(0, None, m._ack_op("g2", copy))
        assert m.log[-1] == "[0] ack g2 ['m1'] -> ok ['acked']"
        m.check_every_step()

    replay(steps)


def test_a_redriven_copy_redelivered_after_the_own_copy_was_acked() -> None:
    """As above, but g2 lets the lease of the redriven copy of m1 expire (into its retry
    topic) and acks its own copy of m1: the copy is still delivered again, as a copy of
    its own (a new offset of topic n, the retry keeping that origin)."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g1, g2 = m.groups["g1"], m.groups["g2"]
        while b"m1" not in g1.dead:
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g1", "n", 4, 10))
            m.check_every_step()
        m._run(1, None, m._redrive_op("g1", b"m1"))
        assert m.log[-1] == "[1] redrive g1 by id m1 -> ok redriven=1"

        def own_after_copy() -> list:
            ds = [d for d in g2.deliveries if d.body == b"m1"]
            copies = [i for i, d in enumerate(ds) if d.via_allowance]
            return [d for d in ds[copies[0] + 1 :] if not d.via_allowance] if copies else []

        while not own_after_copy():
            m._run(0, None, m._receive_op("g2", "n", 4, 10))
            m.check_every_step()
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
        m._run(0, None, m._ack_op("g2", own_after_copy()[-1:]))
        assert m.log[-1] == "[0] ack g2 ['m1'] -> ok ['acked']"
        m.check_every_step()

    replay(steps)


def test_a_redriven_copy_outlives_the_groups_own_dead_letter() -> None:
    """g2 receives both its own copy of m1 and the copy g1's redrive appended; its own copy
    fails its last attempt (into g2's DLQ); the redriven copy is still delivered: a dead
    letter is a copy, not the message."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g1, g2 = m.groups["g1"], m.groups["g2"]
        while b"m1" not in g1.dead:
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g1", "n", 4, 10))
            m.check_every_step()
        m._run(1, None, m._redrive_op("g1", b"m1"))
        assert m.log[-1] == "[1] redrive g1 by id m1 -> ok redriven=1"
        while b"m1" not in g2.dead:
            m._run(0, None, m._receive_op("g2", "n", 4, 10))
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m.check_every_step()
        assert len({d.copy for d in g2.deliveries if d.body == b"m1"}) == 2

    replay(steps)


def test_a_letter_redriven_by_the_step_that_dead_lettered_it_is_a_redriven_copy() -> None:
    """In one step (a receive, a redrive, the receive re-run: ``rerun_after_change``) the
    receive's expiry move sends g1's last attempts of m1 and m2 to its DLQ, the cursor
    redrive sends both letters straight back, and the re-run receive gets the copies
    (attempt 1). No check listed the DLQ in between: the model must list it when the
    redrive answers, or it takes a copy for a redelivery that did not count its attempt."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g1 = m.groups["g1"]
        while g1.last_attempt.get(b"m1") != 2:  # g1 has two attempts
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g1", "n", 4, 10))
            m.check_every_step()
        m.clock.advance(11)  # past the last attempt's lease
        m.rerun_after_change(0, "receive", 0, 3, None, "redrive", 0, 0)
        assert m.log[-2] == "[1] redrive g1 (cursor) -> ok redriven=2"  # m1 and m2
        assert "m1#1" in m.log[-1]
        m.check_every_step()

    replay(steps)


def test_an_ack_of_the_handle_before_a_change_of_invisible_time_settles_the_message() -> None:
    """g1 changes the invisible time of m1 (a new handle), then acks m1 by the handle it
    had before (seed 919243822, worker 1, with a transaction part). The broker answers
    ``acked`` and never delivers m1 again: a change of invisible time is not a delivery,
    and the old handle may still ack (docs/http-api.md). The model took the new handle
    for a redelivery (stale-ack-acked); the search reported ``lost``, the violation of
    the history's rest that ran after it."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        live = [d for _, d in m._live(stale_too=False)]
        m1 = next(
            i for i, d in enumerate(live) if d.body == b"m1" and d in m.groups["g1"].deliveries
        )
        m._interleave(0, m._op_change_invisible(m1, 0), 10, m._op_ack(m1, 0))
        assert m.log[-2] == "[0] change_invisible g1 m1#1 10s (ran to its end first) -> ok m1#1"
        assert m.log[-1] == "[1] ack g1 ['m1#1'] -> ok ['acked']"
        m.check_every_step()

    replay(steps)


def test_a_history_that_broke_an_invariant_is_not_brought_to_rest() -> None:
    """hypothesis runs the machine's teardown after the step that raised: bringing the
    history to rest then judges a model that step left half-updated (an ack's ``acked``
    not yet recorded), and the rest's own violation is the one reported (seed 919243822
    reported ``lost`` for a step's stale-ack-acked). A history that broke an invariant is
    only closed."""
    m = ReliabilityMachine()
    try:
        m.start_with_messages_in_flight(0, 0, 0)
        m.msgs[b"never"] = Msg(b"never", "n", "id-never", "certain")  # left half-updated
        with pytest.raises(Violation):
            m._violate("stale-ack-acked", "a step's violation")
    except BaseException:
        m.world.close()
        raise
    m.teardown()


def test_a_receive_while_an_ack_of_the_group_head_is_paused_after_its_write() -> None:
    """g1 holds m4 (a FIFO message group, its lease past its deadline) with m5 behind it; an ack
    of m4 and of a message of topic n (another lease) pauses after the write that acks
    m4, and another container's receive delivers m5. The order is right (m4 is acked);
    the ack has not answered yet, so the model must count m4 as possibly settled while
    its ack is in flight (found by a search of seed 5)."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 got m1#1, m2#1 and m4#1, m5#1 (FIFO)
        m.check_every_step()
        g1 = m.groups["g1"]
        other = next(d for d in g1.deliveries if d.topic == "n")  # another lease
        m.clock.advance(11)  # past the lease of m4 and m5
        m._run(0, None, m._receive_op("g1", "f", 1, 10))  # m4#2, in place
        m.check_every_step()
        m4 = g1.latest[b"m4"]
        assert m4.attempt == 2
        m.clock.advance(11)  # past m4's lease again
        m._interleave(1, m._ack_op("g1", [m4, other]), 1, m._receive_op("g1", "f", 2, 10))
        assert m.log[-2].startswith("[0] receive g1 f max 2 invisible 10s (while [1] ack g1")
        assert "m5#" in m.log[-2]
        assert m.log[-1].endswith("-> ok ['acked', 'acked']")
        m.check_every_step()

    replay(steps)


def test_a_step_whose_answer_was_lost_after_its_commit_is_settled_by_its_retry() -> None:
    """An exactly-once step commits, then its answer is lost: the model assumes neither
    effect; a receive past the lease's deadline must not bring the acked message back,
    and at rest the step's retry answers the first result (both effects, stored once)."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)
        m.step(0, 0, 0, Fault(2, "lost"))
        assert "answer lost after dynamodb:TransactWriteItems -> error" in m.log[-1], m.log[-1]
        [(_, group, d, out)] = m.pending_steps
        m.advance(4)  # 31 s: past every lease
        m.receive(0, 0, 0, None)
        m.check_every_step()
        assert out.status == "pending" and group == "g1" and d.body == b"m1"


def test_a_receive_inside_an_offset_reset_gets_a_rewound_queue_from_attempt_one() -> None:
    """g2 acks m1 by an exactly-once step that sends m11 to queue 0 of n (the answer of its
    S3 write lost and resent: m11 is stored once), then leases m11 for 30 s (attempt 1). A
    reset of g2 on n to earliest writes queue 0 (transaction #0: cursor and committed to the
    start, m11's lease dropped) and pauses before queue 1; a receive in between gets m11
    again from the rewound queue 0, as attempt 1: the reset starts the queue over, so
    neither the dropped lease nor the attempt count holds any more (seed 261717681, worker 0:
    attempt-not-counted). The model judged that receive as if no reset had begun."""
    random.seed(0)  # where sends and receives start their rotation of queues: m11 at queue 0

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g2 = m.groups["g2"]
        live = [d for _, d in m._live(stale_too=False)]
        m.step(0, live.index(g2.deliveries[0]), 0, Fault(0, "resent"))
        assert m.log[-1] == (
            "[0] step g2 ack m1#1 send m11 seq 1 !answer lost after s3:PutObject, resent "
            "-> ok duplicate=False"
        )
        m.clock.advance(11)  # past the leases of m1 and m2
        m._run(0, None, m._receive_op("g2", "n", 4, 30))
        assert m.log[-1] == "[0] receive g2 n max 4 invisible 30s -> ok ['m11#1', 'm3#1']"
        m.check_every_step()
        assert g2.latest[b"m11"].copy == (b"m11", m.n("n"), 0, 0)  # stored at queue 0, 0
        read = m.world.observer.log_reader.read(m.n("n"), 0, 0, max_messages=100)
        assert [x.body for x in read.messages].count(b"m11") == 1
        m.race_at_reset(0, 1, 2, 1)  # g2 on n, the receive before transaction #1 (queue 1)
        inside = next(line for line in m.log if "(while [0] reset g2 n to earliest" in line)
        assert inside == (
            "[1] receive g2 n max 2 invisible 30s (while [0] reset g2 n to earliest paused "
            "before TransactWriteItems #1) -> ok ['m11#1', 'm12#1']"
        )
        m.check_every_step()

    replay(steps)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_a_receive_inside_a_cursor_redrive_after_its_append_gets_the_copies(group: str) -> None:
    """g1 (two attempts) lets m1 and m2 run out into its DLQ; a redrive by cursor appends
    both copies to n (its TransactWriteItems) and pauses before it saves the DLQ cursor
    (its UpdateItem); a receive of g1, or of g2, in between gets the copies (attempt 1). They
    are stored: the redrive has sent its letters back, whatever it answers next. The model
    granted the copies only once the redrive answered, and judged them as the dead letter
    (g1) or as a redelivery of m1 that did not count (g2)."""
    random.seed(0)  # where sends and receives start their rotation of queues

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g1 = m.groups["g1"]
        while b"m1" not in g1.dead:
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g1", "n", 4, 10))
            m.check_every_step()
        assert set(g1.letter_bodies.values()) == {b"m1", b"m2"}
        redrive, receive = m._redrive_op("g1", None), m._receive_op(group, "n", 8, 10)
        m._interleave(0, redrive, 0, receive, before=("UpdateItem", 0))
        inside = next(line for line in m.log if "(while [0] redrive g1 (cursor)" in line)
        assert "'m1#1', 'm2#1'" in inside, inside
        assert m.log[-1] == (
            "[0] redrive g1 (cursor) (paused before UpdateItem #0) -> ok redriven=2"
        )
        m.check_every_step()

    replay(steps)


def test_a_second_start_inside_a_move_tasks_run_is_refused() -> None:
    """The move rules' race of a second StartMessageMoveTask inside a task's run (before
    its append): the group's task is running, so the start answers none and the run moves
    each dead letter once."""

    def steps(m: ReliabilityMachine) -> None:
        m.race_at_move(0, ("run", "start"), 0, 0)
        second = next(line for line in m.log if "(while [0] move task d -> b: run" in line)
        assert second.startswith("[1] move task d -> b: start, run")
        assert second.endswith("-> ok moved=none: a live runner holds the task")

    replay(steps)


PURGE_RULES = "sqs_send,sqs_receive,sqs_purge,sqs_wait,tick"


def test_a_purge_deletes_what_was_sent_before_it_and_forgets_its_deduplication_ids() -> None:
    """The SQS rules (sqs_rules.py): a FIFO send and a delayed send, a purge of each queue,
    the same deduplication id sent again; the message after the purge is a new one, the
    ones before it are never delivered."""

    def steps(m: ReliabilityMachine) -> None:
        m.sqs_send(0, 0, 0)  # pf.fifo q1, dedup d0
        m.sqs_send(1, 0, 1)  # pd q2, delayed 5 s
        m.sqs_purge(0, 0)
        m.sqs_purge(1, 1)
        m.sqs_send(1, 0, 0)  # pf.fifo q3, dedup d0 again: a new message
        m.sqs_wait(11)
        m.tick(0, 0, None)
        m.sqs_receive(0, 0)
        m.sqs_receive(1, 1)
        assert m.log[-2].endswith("-> ok ['q3']") and m.log[-1].endswith("-> ok []")

    replay(steps, narrowed(ReliabilityMachine, PURGE_RULES))


def test_a_resume_inside_a_move_tasks_run_leaves_the_task_to_its_runner() -> None:
    """The move rules' race of a resume inside a task's run (its runner's hold still
    live): the resume takes nothing over and the run moves each dead letter once."""

    def steps(m: ReliabilityMachine) -> None:
        m.race_at_move(0, ("run", "resume"), 0, 0)
        second = next(line for line in m.log if "(while [0] move task d -> b: run" in line)
        assert second.startswith("[1] move tasks: resume running")
        assert second.endswith("-> ok moved=no task")

    replay(steps)


def test_a_cancel_inside_a_move_tasks_run_stops_it_before_its_append() -> None:
    """The move rules' race of a cancel inside a task's run, before its append: the run
    ends the task CANCELLED having moved nothing, as the cancel answered (checked at rest:
    moved-after-cancel)."""

    def steps(m: ReliabilityMachine) -> None:
        m.race_at_move(0, ("run", "cancel"), 0, 0)
        assert m.log[-2].startswith("[1] move task: cancel the latest (while [0] move task")
        assert m.log[-2].endswith("-> ok moved=0 (CANCELLING)")
        assert m.log[-1].endswith("-> ok moved=0 (CANCELLED)")

    replay(steps)


def _redrive_m1_of_g1(m: ReliabilityMachine) -> None:
    """g1 (two attempts) lets m1 run out into its DLQ and redrives it by id: the copy is
    appended to topic n, which g2 reads as well."""
    g1 = m.groups["g1"]
    while b"m1" not in g1.dead:
        m.clock.advance(11)
        m._run(0, None, m._op_tick(0, 0))
        m._run(0, None, m._receive_op("g1", "n", 4, 10))
        m.check_every_step()
    m._run(1, None, m._redrive_op("g1", b"m1"))
    assert m.log[-1] == "[1] redrive g1 by id m1 -> ok redriven=1"


def test_an_ack_of_a_redriven_copy_after_the_groups_own_copy_was_dead_lettered() -> None:
    """g2 holds its own copy of m1 at its last attempt (3) and receives the copy g1's
    redrive appended (attempt 1); it nacks its own copy (into g2's DLQ), then acks the
    redriven copy, whose lease runs: ``acked`` is right, the dead letter is the other copy."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g2 = m.groups["g2"]
        while g2.last_attempt.get(b"m1") != 3:
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g2", "n", 4, 50))
            m.check_every_step()
        (own,) = [d for d in g2.deliveries if d.body == b"m1" and d.attempt == 3]
        _redrive_m1_of_g1(m)
        while not (copies := [d for d in g2.deliveries if d.via_allowance]):
            m._run(0, None, m._receive_op("g2", "n", 4, 50))
            m.check_every_step()
        (copy,) = copies
        assert copy.body == b"m1" and copy.attempt == 1 and copy.deadline > m.clock()
        m._run(0, None, m._nack_op("g2", own))
        m.check_every_step()
        assert b"m1" in g2.dead
        m._run(1, None, m._ack_op("g2", [copy]))
        assert m.log[-1] == "[1] ack g2 ['m1'] -> ok ['acked']"
        m.check_every_step()

    replay(steps)


def test_an_ack_of_a_redriven_copy_after_the_groups_own_copy_was_delivered_again() -> None:
    """g2 receives its own copy of m1 (attempt 2) and the redriven copy (attempt 1); it
    nacks its own copy, which comes back as attempt 3; then it acks the redriven copy,
    whose lease runs: ``acked`` is right, attempt 3 was of the other copy."""

    def steps(m: ReliabilityMachine) -> None:
        m.start_with_messages_in_flight(0, 0, 0)  # g1 and g2 got m1#1, m2#1 (10 s)
        g2 = m.groups["g2"]
        _redrive_m1_of_g1(m)

        def own_again() -> list:
            return [d for d in g2.deliveries if d.body == b"m1" and d.attempt == 2]

        # the two come in one receive or one after the other (the retry topic's release
        # and the redriven copy's append are separate): wait for both within the copy's
        # lease (120 s)
        while not (copies := [d for d in g2.deliveries if d.via_allowance]) or not own_again():
            m.clock.advance(51 if not copies else 11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g2", "n", 4, 120))
            m.check_every_step()
        (copy,) = copies
        (own,) = own_again()
        m._run(0, None, m._nack_op("g2", own))
        while g2.latest[b"m1"].attempt != 3:
            m.clock.advance(11)
            m._run(0, None, m._op_tick(0, 0))
            m._run(0, None, m._receive_op("g2", "n", 4, 10))
            m.check_every_step()
        assert copy.deadline > m.clock()
        m._run(1, None, m._ack_op("g2", [copy]))
        assert m.log[-1] == "[1] ack g2 ['m1'] -> ok ['acked']"
        m.check_every_step()

    replay(steps)
