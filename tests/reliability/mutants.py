"""Mutation runs of the reliability harness: which broker guards does it catch?

    .venv/bin/python tests/reliability/mutants.py [--guard NAME] [--histories 30] \
        [--aimed-histories 20] [--seed 1] [--steps 30] [--baseline-dir DIR]

Each guard below is a fence, a condition or a check in ``cirrusmq_broker`` that the
reliability contract (docs/reliability.md) rests on. For each one in turn: copy the tree
(layers/, sdk/, infra/, functions/, tests/, template.yaml) into a scratch directory, remove
the guard there (each edit's snippet must occur exactly once in its file, or the run stops:
the table cannot silently rot), and search the model-based test (mutant_search.py) with the
scratch copy first on PYTHONPATH: the general search (seed, history cap), then, if it did
not catch the mutant, the guard's aimed runs (some rules only, some drawn more often).
A guard the harness does not drive names targeted tests instead (``tests``): it is caught
when they pass on the unmutated copy and fail on the mutant (``pytest -x -q``, run in the
scratch copy with its packages first on PYTHONPATH, checked as for the search).

A mutant is caught by a violation that the unmutated baseline, run on the same seed and
rules, does not show in the same history (the baseline runs first; its violations are
reported). Prints ``guard | caught by | histories needed | seconds`` and exits 1 if a guard
survives. A run that passes ``--timeout`` (a mutant that makes a history hang, or a loaded
machine) ends that guard's row as "timed out after N s", counted as not caught; a run that
fails otherwise ends it as "harness error"; either way the other guards go on and the table
is printed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BROKER = "layers/broker/cirrusmq_broker"
API = "layers/api/cirrusmq_api"
COPIED = ("layers", "sdk", "infra", "functions", "tests", "template.yaml", "pyproject.toml")
PATHS = ("layers/broker", "layers/api", "infra", "sdk")
"""The scratch copy's package roots, first on the child's PYTHONPATH."""


@dataclass(frozen=True)
class Edit:
    """Replace the one occurrence of ``snippet`` in ``file`` (under ``package``: the broker
    package, or the API layer's for a guard of a protocol adapter)."""

    file: str
    snippet: str
    replacement: str
    package: str = BROKER


@dataclass(frozen=True)
class Guard:
    name: str
    protects: str
    edits: tuple[Edit, ...]
    aims: tuple[tuple[str, str], ...] = ()
    """(label, rules spec of mutant_search.py --rules): runs aimed at this guard's race."""
    note: str = ""
    tests: tuple[str, ...] = ()
    """pytest node ids: the catcher of a guard the harness does not drive (no search then),
    or of one its search (``aims``) did not catch."""


AIMED = (
    "send,receive,ack,nack,advance,tick,cancel,txn_send,commit,redrive,rerun=2,"
    "late_ack=3,dead_letter,race_at_write=8"
)
"""The aimed run's rules: the races at guarded writes (race_at_write), late acks of
moved leases, dead letters to redrive, failed requests re-run, and the plain requests
they need. One rule set for every guard: one baseline."""
RACES = ("races at guarded writes", AIMED)
COMMIT = (
    "parts and rollbacks inside commits",
    "send,receive,ack,txn_send,commit,rollback,race_at_commit=6",
)
EXPIRY = ("lease requests inside expiry moves", "send,receive,ack,advance,race_at_expiry=6")
CORRUPT = ("an object with a row more than indexed", "send,receive,ack,advance,corrupt_object=2")
RESET = ("receives inside offset resets", "send,receive,ack,advance,race_at_reset=4")
WHOLE_SAVE = (
    "            if writes or extra_items:\n"
    '                items = [{"Update": summary}, *writes]\n'
)
LEASES_FIRST = (
    '            for write in [w for w in writes if "Put" in w] if not extra_items else []:\n'
    '                self._client.put_item(TableName=self._table, **write["Put"])\n'
    '            writes = [w for w in writes if "Put" not in w or extra_items]\n'
)
"""The receive-save-whole mutant: a save's lease puts go before its summary, on their own."""
STALE = (
    "receives that read before another receive and its acks",
    "send,receive,ack,advance,stale_receive=4",
)
STEPS = (
    "exactly-once steps on moving leases",
    "send,receive,ack,nack,change_invisible,advance,step=4,step_retry=2",
)

MOVES = (
    "dead letters forwarded, move tasks raced",
    "mv_send,mv_receive,mv_ack,mv_move,mv_resume,mv_cancel,race_at_move=4,advance",
)
"""The SQS dead-letter forward and the message move tasks (moves_rules.py): an ack inside
the expiry move into the destination; an ack, a cancel, a takeover, a second start or a
resume inside a task's run."""
PURGE = (
    "purges among sends of two SQS queues",
    "sqs_send=3,sqs_receive=2,sqs_purge,sqs_wait,tick",
)
"""The SQS adapter's PurgeQueue (sqs_rules.py): FIFO sends repeating deduplication ids and
delayed sends, each queue purged among them."""
SQS_FIFO = (
    "SQS FIFO message groups",
    "sqs_fifo_send=3,sqs_fifo_receive=2,sqs_fifo_delete=2,sqs_fifo_change,sqs_fifo_race,sqs_wait",
)
"""SQS FIFO message groups (sqs_fifo_rules.py): sends to three groups, receives with faults,
deletes and visibility changes through latest and older handles, receives raced with
another request on the other container, time passing."""

SQS_STANDARD = (
    "SQS standard-queue visibility",
    "sqs_std_send=3,sqs_std_receive=2,sqs_std_delete=2,sqs_std_change=2,sqs_std_race,sqs_wait",
)
"""SQS standard-queue visibility (sqs_standard_rules.py): peeks, expiries redelivered in
place, deletes and visibility changes through latest and older handles, receives raced with
another request on the other container, time passing."""

GUARDS: tuple[Guard, ...] = (
    Guard(
        "move-settle-fence",
        "an expiry or nack move commits only if the lease is still as it read it (id, version)",
        (
            Edit(
                "storage/groups/move_settles.py",
                "        condition = {\n"
                '            "ConditionExpression": place.condition(lease_unchanged),\n'
                '            "ExpressionAttributeValues": to_item(as_read(before)),\n        }\n',
                "        condition: dict[str, Any] = {}\n",
            ),
        ),
        aims=(RACES, EXPIRY),
    ),
    Guard(
        "content-digest",
        "a content-named object (moves, releases) ends with a digest of its bytes: a re-run "
        "with other bytes never reuses it",
        (
            Edit(
                "services/batch_writer.py",
                '                name = f"{naming.name}{digest}"\n',
                "                name = naming.name\n",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "move-object-digest",
        "a move's batch object is content-named (stamp, moved offsets, then its bytes), "
        "not named by its stamp and offsets alone",
        (
            Edit(
                "services/moves.py",
                "            content_named(object_name_prefix(stamp, digest)),\n",
                '            __import__("dataclasses").replace(\n'
                '                content_named(object_name_prefix(stamp, digest)), kind="rows"\n'
                "            ),\n",
            ),
        ),
        aims=(RACES,),
        note="redundant: the name's prefix already names the stamp and the offsets moved, "
        "and a move's rows follow from them (defence in depth)",
    ),
    Guard(
        "fixed-name-byte-compare",
        "a commit's object under a fixed name is reused only if it holds the very bytes",
        (
            Edit(
                "storage/batch_objects.py",
                "        if self.get(key) != data:\n            raise TopicObjectTaken(key)\n",
                "        pass\n",
            ),
        ),
        aims=(RACES,),
        note="a commit's name is its transaction's: only that commit's re-run meets it, with "
        "the same half object (defence in depth)",
    ),
    Guard(
        "verifying-reader",
        "a reader takes at most an index item's count rows from its object",
        (
            Edit(
                "services/batch_reader.py",
                "    return rows[: entry.count]\n",
                "    return rows\n",
            ),
        ),
        aims=(CORRUPT,),
        note="reached only when an object's rows differ from its index count, which no "
        "writer produces while the naming guards hold (defence in depth)",
    ),
    Guard(
        "ack-moved-answer",
        "an ack's slow path answers expired (not acked) for a message its lease's expiry "
        "or a nack moved on",
        (
            Edit(
                "services/delivery/ack.py",
                "            if offset in moved:\n",
                "            if offset in moved and False:\n",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "release-taken-fence",
        "a release deletes its delay items only if they are still there: two runs (or a "
        "run and its re-run) never append the same items twice",
        (
            Edit(
                "storage/delays/items.py",
                '            condition = "attribute_exists(due_key) AND cancels = :c"\n',
                '            condition = "cancels = :c"\n',
            ),
            Edit(
                "storage/delays/items.py",
                '            condition, values = "attribute_exists(due_key) AND '
                'attribute_not_exists(cancels)", {}\n',
                '            condition, values = "attribute_not_exists(cancels)", {}\n',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "release-cancel-fence",
        "a release deletes its delay items only if no cancel changed them since it read them",
        (
            Edit(
                "storage/delays/items.py",
                "        if entry.cancels:\n"
                '            condition = "attribute_exists(due_key) AND cancels = :c"\n'
                '            values: dict[str, Any] = {"ExpressionAttributeValues": '
                'to_item({":c": entry.cancels})}\n'
                "        else:\n"
                '            condition, values = "attribute_exists(due_key) AND '
                'attribute_not_exists(cancels)", {}\n',
                '        condition, values = "attribute_exists(due_key)", {}\n',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "cancel-fence",
        "a cancel marks its delay item only if the item is still there (not released)",
        (
            Edit(
                "storage/delays/items.py",
                '                            "ConditionExpression": "attribute_exists(due_key)",\n',
                "",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "redrive-claim",
        "a redrive appends a letter only with its claim, conditional on the claims as read",
        (
            Edit(
                "storage/redrive_claims.py",
                '                "ConditionExpression": unchanged_since_read if read.version '
                "else not_yet_claimed,\n",
                "",
            ),
            Edit(
                "storage/redrive_claims.py",
                '        if read.version:\n            values[":read"]',
                '        if False:\n            values[":read"]',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "commit-parts-fence",
        "a commit starts (OPEN -> COMMITTING) only if no part landed since it read the transaction",
        (
            Edit(
                "storage/transactions.py",
                '            condition += " AND message_count = :parts_read"\n'
                '            attrs[":parts_read"] = message_count\n',
                "            pass\n",
            ),
        ),
        aims=(RACES, COMMIT),
    ),
    Guard(
        "part-open-fence",
        "a transaction part is recorded only while the transaction is OPEN",
        (
            Edit(
                "storage/transactions.py",
                '"(#state = :open AND topic = :topic AND transactional_id = :tid "',
                '"(topic = :topic AND transactional_id = :tid "',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "produce-stamp",
        "a stamped append records its stamp once (attribute_not_exists): a resend stores "
        "nothing twice",
        (
            Edit(
                "storage/producers.py",
                '        put: dict[str, Any] = {"TableName": self._table, '
                '"ConditionExpression": not_yet_recorded}\n',
                '        put: dict[str, Any] = {"TableName": self._table}\n',
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "waiter-still-registered",
        "a told waiter is deleted only if no wait registered it again while its post was in flight",
        (
            Edit(
                "storage/connections.py",
                "                condition, values = still_that_registration, "
                '{":reg": waiter.registration}\n',
                '                condition, values = "attribute_not_exists(pk) OR '
                'attribute_exists(pk)", None\n',
            ),
        ),
        tests=(
            "tests/broker/test_notifier.py::"
            "test_a_registration_renewed_while_its_post_is_in_flight_stays",
        ),
    ),
    Guard(
        "connection-wait-cap",
        "a connection takes new (group, topic) waits only while it has room for all of them",
        (
            Edit(
                "storage/connections.py",
                'open_with_room = "attribute_exists(pk) AND (attribute_not_exists(waits) OR '
                'size(waits) <= :room)"\n',
                'open_with_room = "attribute_exists(pk) AND (attribute_not_exists(waits) OR '
                'size(waits) <= :room OR size(waits) > :room)"\n',
            ),
        ),
        tests=(
            "tests/broker/test_channel_waits.py::"
            "test_two_waits_racing_on_one_connection_keep_its_cap",
        ),
    ),
    Guard(
        "key-wait-cap",
        "a key's window takes new waits only while it has room for all of them",
        (
            Edit(
                "storage/connections.py",
                'key_window_with_room = "attribute_not_exists(registered) OR registered <= '
                ':room"\n',
                'key_window_with_room = "attribute_not_exists(registered) OR registered <= '
                ':room OR registered > :room"\n',
            ),
        ),
        tests=(
            "tests/broker/test_channel_waits.py::test_two_waits_racing_on_one_key_keep_its_cap",
        ),
    ),
    Guard(
        "postpone-put-new",
        "a postponed delay item's copy is put only where no item is (never over another)",
        (
            Edit(
                "storage/delays/items.py",
                '                "ConditionExpression": "attribute_not_exists(due_key)",\n',
                "",
            ),
        ),
        tests=("tests/broker/services/delays/test_missing_delay_object.py",),
        note="the copy is put in one transaction with the delete of the item as read, "
        "which already fails for a second run (defence in depth)",
    ),
    Guard(
        "postpone-as-read",
        "a postpone deletes the delay item only as it read it (not moved, cancel unchanged)",
        (
            Edit(
                "storage/delays/items.py",
                "                TransactItems=[self.delete_request(entry), "
                "self.put_request(later)]\n",
                '                TransactItems=[{"Delete": {k: v for k, v in '
                'self.delete_request(entry)["Delete"].items() if k in ("TableName", "Key")}}, '
                "self.put_request(later)]\n",
            ),
        ),
        tests=(
            "tests/broker/services/delays/test_missing_delay_object.py::"
            "test_an_object_deleted_by_a_run_that_moved_its_item_settles_nothing_twice",
        ),
    ),
    Guard(
        "transaction-register-first",
        "a transactional id is registered at epoch 1 only if not registered yet",
        (
            Edit(
                "storage/transactions.py",
                '        not_registered = "attribute_not_exists(item_key)"\n',
                '        not_registered = "attribute_not_exists(item_key) OR '
                'attribute_exists(item_key)"\n',
            ),
        ),
        tests=(
            "tests/compat/test_mqhttp_transactions.py::"
            "test_a_half_message_publish_resent_after_a_lost_answer_opens_one_transaction",
            "tests/broker/services/transactions/test_transactions.py::"
            "test_a_one_request_registration_leaves_a_later_epoch_and_its_owner",
        ),
    ),
    Guard(
        "checker-run-lease",
        "a checker (or delay) run claims its run lease only if no run already covers it",
        (
            Edit(
                "storage/run_leases.py",
                '            "attribute_not_exists(run_until) OR run_until < :need",\n',
                '            "attribute_not_exists(run_until) OR run_until < :need OR '
                'run_until >= :need",\n',
            ),
        ),
        tests=(
            "tests/broker/services/transactions/test_checker_runs.py::"
            "test_a_run_covered_by_a_looping_run_returns_after_its_first_pass",
        ),
    ),
    Guard(
        "run-ask-once",
        "a send asks for a scheduler run only if no ask since the last run is pending",
        (
            Edit(
                "storage/run_leases.py",
                '            "attribute_not_exists(asked_at) OR asked_at < :since",\n',
                '            "attribute_not_exists(asked_at) OR asked_at < :since OR '
                'asked_at >= :since",\n',
            ),
        ),
        tests=(
            "tests/broker/services/delays/test_scheduled_at_rest.py::"
            "test_a_send_due_before_the_next_run_wakes_the_scheduler_once",
        ),
    ),
    Guard(
        "run-started-answers-asks",
        "a run answers only the asks made before it started",
        (
            Edit(
                "storage/run_leases.py",
                '"REMOVE asked_at", "asked_at <= :now"',
                '"REMOVE asked_at", "asked_at <= :now OR asked_at > :now"',
            ),
        ),
        tests=(
            "tests/broker/services/delays/test_scheduled_at_rest.py::"
            "test_a_run_started_by_a_wake_answers_it_so_the_next_send_wakes_again",
        ),
        note="survives its test: an ask removed early is a later send's wake lost, covered "
        "by the looping run and the minute schedule (lateness, never loss); no test shows it yet",
    ),
    Guard(
        "handoff-settle-in-append",
        "a move task's append carries the settle of what it moves in the lease (conditional "
        "on the lease as read) in its own transaction",
        (
            Edit(
                "services/retries/handoff.py",
                "                items = [*self._states.settle_requests(state, current, after), "
                "*fence(len(copies))]\n",
                "                items = [*fence(len(copies))]\n",
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_move_task_moves_each_message_once_and_completes",
        ),
    ),
    Guard(
        "move-task-progress-fence",
        "a move task's append records its progress only on the task as read (version, "
        "still running)",
        (
            Edit(
                "storage/move_tasks.py",
                '"UpdateExpression": "SET moved = moved + :n, version = :next, runner_until = '
                ':u",\n                "ConditionExpression": task_as_read,\n',
                '"UpdateExpression": "SET moved = moved + :n, version = :next, runner_until = '
                ':u",\n                "ConditionExpression": f"({task_as_read}) OR '
                'attribute_exists(moved)",\n',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_cancel_landing_before_the_tasks_append_moves_nothing",
        ),
    ),
    Guard(
        "move-task-takeover",
        "a move task is taken over only once its runner's hold has passed",
        (
            Edit(
                "storage/move_tasks.py",
                'f"{task_as_read} AND runner_until < :now",\n',
                'f"{task_as_read} AND (runner_until < :now OR runner_until >= :now)",\n',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_runner_that_dies_is_taken_over_and_nothing_moves_twice",
        ),
    ),
    Guard(
        "move-task-one-running",
        "a group's move task starts only if none is running",
        (
            Edit(
                "storage/move_tasks.py",
                'no_task_running = "attribute_not_exists(running)"\n',
                'no_task_running = "attribute_not_exists(running) OR attribute_exists(running)"\n',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_running_task_refuses_a_second_and_lists_with_its_handle",
        ),
    ),
    Guard(
        "dedup-window",
        "a FIFO deduplication record is replaced only once it is older than its window",
        (
            Edit(
                "storage/producers.py",
                'put["ConditionExpression"] = f"{not_yet_recorded} OR {recorded_before}"\n',
                'put["ConditionExpression"] = f"{not_yet_recorded} OR {recorded_before} '
                'OR attribute_exists(producer_key)"\n',
            ),
        ),
        aims=(PURGE,),
        tests=(
            "tests/broker/services/test_produce_deduplication.py::"
            "test_a_repeat_within_the_window_answers_the_first_send",
        ),
    ),
    Guard(
        "dedup-window-expires",
        "a FIFO deduplication record older than its window is replaced: a send after the "
        "window is a new message, not answered as a repeat",
        (
            Edit(
                "storage/producers.py",
                'put["ConditionExpression"] = f"{not_yet_recorded} OR {recorded_before}"\n',
                'put["ConditionExpression"] = f"{not_yet_recorded} OR ({recorded_before} '
                'AND {not_yet_recorded})"\n',
            ),
        ),
        tests=(
            "tests/broker/services/test_produce_deduplication.py::"
            "test_a_repeat_after_the_window_is_a_new_message_and_holds_the_stamp",
        ),
    ),
    Guard(
        "move-task-cancel-fence",
        "a cancel moves the task's version on: a runner's append read before it stores nothing",
        (
            Edit(
                "storage/move_tasks.py",
                '{":cancelling": CANCELLING, ":running": RUNNING, ":one": 1}',
                '{":cancelling": CANCELLING, ":running": RUNNING, ":one": 0}',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_cancel_landing_before_the_tasks_append_moves_nothing",
        ),
    ),
    Guard(
        "move-task-cancel-running",
        "a cancel marks a task CANCELLING only while it runs (``#s = :running``)",
        (
            Edit(
                "storage/move_tasks.py",
                '                ConditionExpression="#s = :running",\n',
                '                ConditionExpression="#s = :running OR attribute_exists(#s)",\n',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_cancel_of_a_finished_task_is_not_found_and_leaves_it_completed",
        ),
        note="without it a cancel of a finished task answers as if it stopped it and leaves "
        "the task CANCELLING for good (its lock is gone, so no finish lands): a wrong answer "
        "and listing, no message moved or kept wrongly",
    ),
    Guard(
        "move-task-finish-as-read",
        "a task's finish lands only on the task as its runner read it (``task_as_read``)",
        (
            Edit(
                "storage/move_tasks.py",
                '                            "UpdateExpression": update,\n'
                '                            "ConditionExpression": task_as_read,\n',
                '                            "UpdateExpression": update,\n'
                '                            "ConditionExpression": f"({task_as_read}) OR '
                'attribute_exists(#s)",\n',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_cancel_landing_before_the_tasks_last_finish_ends_it_cancelled",
        ),
        note="without it a cancel that answered between the last (empty) step and the finish "
        "is overwritten: the task ends COMPLETED, not CANCELLED; nothing moves after the "
        "cancel (the appends keep their own fence), and a finish of a finished task is still "
        "refused by ``lock_names_task``",
    ),
    Guard(
        "move-task-lock-names-task",
        "a finish clears the group's lock only while it names the finishing task (lock_names_task)",
        (
            Edit(
                "storage/move_tasks.py",
                'lock_names_task = "running = :stream"\n',
                'lock_names_task = "running = :stream OR attribute_exists(running)"\n',
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_finish_clears_the_lock_only_while_it_names_the_finishing_task",
        ),
        note="the lock and the task change in one transaction each, so no writer leaves a "
        "running task whose lock names another: its test sets the lock by hand (defence "
        "in depth)",
    ),
    Guard(
        "move-task-resume-held",
        "a task taken over first moves what of its last step's batch is still leased",
        (
            Edit(
                "services/move_tasks.py",
                "        if task.held and task.status == RUNNING:\n",
                "        if False:\n",
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_a_runner_that_dies_is_taken_over_and_nothing_moves_twice",
        ),
    ),
    Guard(
        "dead-letter-destination-fence",
        "a dead-letter move into the group's destination topic carries the settle of the "
        "lease as read",
        (
            Edit(
                "services/retries/retry_topic.py",
                "recorded = self._moves.append(destination, queue, copies, stamp, digest, "
                "fence=fence)\n",
                "recorded = self._moves.append(destination, queue, copies, stamp, digest, "
                "fence=None if elsewhere else fence)\n",
            ),
        ),
        aims=(MOVES,),
        tests=(
            "tests/broker/services/test_move_tasks.py::"
            "test_an_ack_landing_before_a_dead_letter_move_keeps_it_out_of_the_destination",
        ),
    ),
    Guard(
        "run-withdraw-own-ask",
        "a wake that could not start a run withdraws its own ask only (``withdraw_ask``)",
        (
            Edit(
                "storage/run_leases.py",
                '"REMOVE asked_at", "asked_at = :at"',
                '"REMOVE asked_at", "asked_at = :at OR asked_at <> :at"',
            ),
        ),
        tests=(
            "tests/broker/services/delays/test_scheduled_at_rest.py::"
            "test_a_failed_wake_withdraws_its_own_ask_not_a_later_sends",
        ),
    ),
    Guard(
        "handoff-idempotent-append",
        "a move task's append whose stamp was recorded already counts nothing and reads "
        "the lease again (an earlier attempt of the very move committed)",
        (
            Edit(
                "services/retries/handoff.py",
                "                    return optimistic.CONFLICT  # another attempt of this very "
                "move: read again\n",
                "                    pass\n",
            ),
        ),
        aims=(MOVES,),
        tests=("tests/broker/services/test_move_tasks.py",),
        note="the stamp names the lease version as read, and the append that recorded it "
        "moved that version on: a re-run reads another version, so no run meets its own "
        "stamp again (defence in depth)",
    ),
    Guard(
        "settle-whole-one-per-item",
        "an ack naming two deliveries of one FIFO lease (a redelivery in place keeps the "
        "item) writes that item once in its transaction: DynamoDB refuses a transaction "
        "writing an item twice, and the ack answered 500",
        (
            Edit(
                "storage/groups/lease_acks.py",
                "            if item not in items:\n",
                "            if True:\n",
            ),
        ),
        tests=(
            "tests/broker/services/delivery/test_two_handles_of_one_fifo_lease.py::"
            "test_one_ack_of_both_deliveries_of_a_fifo_lease_acks_the_current_one",
        ),
    ),
    # exactly-once consume -> produce steps (services/consume_produce/)
    Guard(
        "step-lease-fence",
        "an exactly-once step acks only leases its consumer still holds (same id, before "
        "the deadline, nothing moved out or on): a zombie's step appends nothing",
        (
            Edit(
                "storage/groups/lease_acks.py",
                '    "{p}lease_id = :id AND {p}deadline > :now"\n',
                '    "({p}lease_id = :id OR {p}lease_id <> :id)'
                ' AND ({p}deadline > :now OR {p}deadline <= :now)"\n',
            ),
        ),
        tests=(
            "tests/broker/services/test_consume_produce.py::"
            "test_a_lease_that_moved_on_refuses_the_step_and_its_object_is_swept",
            "tests/broker/services/test_consume_produce.py::"
            "test_a_lease_past_its_deadline_refuses_the_step",
            "tests/broker/services/test_consume_produce.py::"
            "test_a_zombie_whose_fifo_message_was_redelivered_in_place_is_refused",
        ),
        note="the harness's steps meet a FIFO lease redelivered in place too rarely to "
        "catch it (30 general + 21 aimed histories), and a step past its deadline before "
        "any move is an ack the model allows",
    ),
    Guard(
        "step-epoch-fence",
        "an exactly-once step commits only while its producer's registration is at its "
        "epoch: a fenced zombie producer appends and acks nothing",
        (
            Edit(
                "services/consume_produce/service.py",
                "                extra_items=[fence, *lease_items, *delay_puts],\n",
                "                extra_items=[*lease_items, *delay_puts],\n",
            ),
        ),
        tests=(
            "tests/broker/services/test_consume_produce.py::"
            "test_a_fenced_producer_epoch_refuses_the_step",
        ),
    ),
    Guard(
        "step-idempotency-record",
        "a step's append records its stamp in its transaction: a retried commit answers "
        "the first result and appends nothing twice",
        (
            Edit(
                "services/consume_produce/service.py",
                "                stamp=stamp,\n",
                "                stamp=None,\n",
            ),
        ),
        aims=(STEPS,),
    ),
    Guard(
        "step-changed-retry",
        "a step's sequence committed with other contents is a conflict, never the first "
        "result for what the retry carries",
        (
            Edit(
                "services/consume_produce/service.py",
                "        if record.digest != recorded_digest(digest, streams):\n",
                "        if False:\n",
            ),
        ),
        tests=(
            "tests/broker/services/test_consume_produce.py::"
            "test_a_retry_with_changed_inputs_is_refused_and_appends_nothing",
            "tests/broker/services/test_consume_produce.py::"
            "test_a_retry_after_its_output_topic_was_recreated_with_more_queues_is_refused",
        ),
    ),
    Guard(
        "step-size-check",
        "a step needing more than one transaction's 100 items is refused before anything "
        "is written",
        (
            Edit(
                "services/consume_produce/service.py",
                "        if items > MAX_STEP_ITEMS:\n",
                "        if items > 10 * MAX_STEP_ITEMS:\n",
            ),
        ),
        tests=(
            "tests/broker/services/test_consume_produce.py::"
            "test_a_step_too_big_for_one_transaction_is_refused_before_anything_is_stored",
        ),
    ),
    Guard(
        "fifo-held-record",
        "FIFO: a receive that passes over a message whose group a lease holds records it in "
        "its queue's summary (``held``), to hand it out once the group is free",
        (
            Edit(
                "rules/group_state.py",
                "        self.held = (self.held - delivered_set) | frozenset(hold)\n",
                "        self.held = self.held - delivered_set\n",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "fifo-held-release",
        "FIFO: a held message handed out leaves ``held`` (is not held, so not handed out, again)",
        (
            Edit(
                "rules/group_state.py",
                "        self.held = (self.held - delivered_set) | frozenset(hold)\n",
                "        self.held = self.held | frozenset(hold)\n",
            ),
        ),
        aims=(RACES,),
    ),
    Guard(
        "group-summary-fence",
        "a receive, ack or move saves its group queue's summary (cursor, leases) only if no "
        "other request saved it since it was read (``summary_condition``: version as read, "
        "or not stored yet)",
        (
            Edit(
                "storage/groups/codec.py",
                "def summary_condition(state: GroupQueueState) -> dict[str, Any]:\n",
                "def summary_condition(state: GroupQueueState) -> dict[str, Any]:\n    return {}\n",
            ),
        ),
        aims=(RACES,),
        note="a racing save's new lease has the slot of its first offset, which "
        "``lease_condition`` refuses: the pair is the row group-save-fences (defence in "
        "depth)",
    ),
    Guard(
        "append-head-fence",
        "a transactional append moves its queue's head only if the head has not passed the "
        "batch's base (``advance_request``: ``next_offset <= :base``)",
        (
            Edit(
                "storage/queue_heads.py",
                '"ConditionExpression": f"{not_past_base} AND {still_open}",\n',
                '"ConditionExpression": f"{still_open}",\n',
            ),
        ),
        aims=(RACES,),
        note="the index item's ``not_yet_appended`` refuses the same base offset: the pair is the "
        "row append-fences (defence in depth)",
    ),
    Guard(
        "append-index-fence",
        "an append's index item is put only where no item is (``not_yet_appended``): a plain "
        "append's only fence on its offset",
        (
            Edit(
                "storage/log_index.py",
                '                "ConditionExpression": not_yet_appended,\n',
                "",
            ),
        ),
        aims=(RACES,),
        tests=(
            "tests/broker/services/test_produce.py::"
            "test_offsets_stay_contiguous_when_two_containers_race",
        ),
    ),
    Guard(
        "append-fences",
        "an append lands only at the log's end: the head's ``next_offset <= :base`` and the "
        "index item's ``not_yet_appended`` together",
        (
            Edit(
                "storage/queue_heads.py",
                '"ConditionExpression": f"{not_past_base} AND {still_open}",\n',
                '"ConditionExpression": f"{still_open}",\n',
            ),
            Edit(
                "storage/log_index.py",
                '                "ConditionExpression": not_yet_appended,\n',
                "",
            ),
        ),
        aims=(RACES,),
        tests=(
            "tests/broker/services/test_produce.py::"
            "test_offsets_stay_contiguous_when_two_containers_race",
        ),
    ),
    Guard(
        "append-tail-trusted",
        "a cached tail is appended at only while younger than TAIL_TRUSTED_MS (below the "
        "shortest retention): retention never frees the offset it names inside the log",
        (
            Edit(
                "storage/appends.py",
                "if cached is not None and self._clock() - cached[1] < TAIL_TRUSTED_MS:\n",
                "if cached is not None:\n",
            ),
        ),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_cached_tail_is_read_again_before_retention_could_free_its_offset",
        ),
    ),
    Guard(
        "append-claim-move",
        "a claim moves to another base only from the token and bases its mover read: a "
        "paused original and its resend place the batch once",
        (
            Edit(
                "storage/producers.py",
                '                ConditionExpression="#t = :t AND bases = :old",\n',
                '                ConditionExpression="#t = :t",\n',
            ),
        ),
        aims=(RACES,),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_paused_original_and_its_resend_store_the_batch_once",
        ),
    ),
    Guard(
        "append-resume-published",
        "a resend finishing a claim reads the head before the item at the claimed base: an "
        "unpublished base takes the put (whoever races for it), a published one is checked",
        (
            Edit(
                "storage/appends.py",
                "        if resumed and self._published_past(stream):\n",
                "        if resumed:\n",
            ),
        ),
        aims=(RACES,),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_two_resends_of_a_claim_store_the_batch_once",
        ),
    ),
    Guard(
        "append-resume-skipped",
        "a resend finishing a claim checks its claimed base before putting there: never at "
        "a published offset retention freed",
        (
            Edit(
                "storage/appends.py",
                "        if resumed and self._published_past(stream):\n",
                "        if False:\n",
            ),
        ),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_resend_after_retention_stores_nothing_again",
        ),
    ),
    Guard(
        "append-resume-own-item",
        "a resend finding its claimed base published and empty answers from the record: its "
        "batch may have been there (retention, a purge), never appended twice",
        (
            Edit(
                "storage/appends.py",
                "            if holder is None:  # ours may have been there: never append it"
                " twice\n                raise AlreadyRecorded()\n",
                "",
            ),
        ),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_resend_after_retention_stores_nothing_again",
        ),
    ),
    Guard(
        "index-read-below-head",
        "readers by offset take no index item at or past the head (put, not yet published)",
        (
            Edit(
                "storage/log_index.py",
                "if i[0].base_offset < end\n",
                "\n",
            ),
        ),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_reader_by_offset_sees_no_item_beyond_the_head",
        ),
    ),
    Guard(
        "append-holder-own",
        "a put that finds its offset held by its own claim's item counts as placed",
        (
            Edit(
                "storage/appends.py",
                "if holder is None or (token is not None and holder == token):\n",
                "if holder is None:\n",
            ),
        ),
        aims=(RACES,),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_paused_original_and_its_resend_store_the_batch_once",
        ),
    ),
    Guard(
        "append-publish-open",
        "an append's head moves only while the topic is not deleted; one deleted first takes "
        "the item back and refuses the send",
        (
            Edit(
                "storage/queue_heads.py",
                'ConditionExpression=f"{below_end} AND {still_open}",\n',
                'ConditionExpression=f"{below_end}",\n',
            ),
        ),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_topic_deleted_before_the_head_moved_takes_the_item_back",
        ),
    ),
    Guard(
        "append-take-back",
        "an append refused after its put (topic deleted) deletes its index item",
        (
            Edit(
                "storage/appends.py",
                "            self._index.take_back(batch.at(base), claim=token)\n",
                "",
            ),
        ),
        tests=(
            "tests/broker/storage/test_plain_appends.py::"
            "test_a_topic_deleted_before_the_head_moved_takes_the_item_back",
        ),
    ),
    Guard(
        "ack-lease-id",
        "an ack adds its offsets to a lease only while the lease has the handle's id "
        "(``lease_id = :id``)",
        (
            Edit(
                "storage/groups/lease_acks.py",
                '        condition, values, names = "{p}lease_id = :id", {":id": lease_id}, {}\n',
                "        condition, values, names = (\n"
                '            "({p}lease_id = :id OR attribute_exists({p}lease_id))",\n'
                '            {":id": lease_id},\n'
                "            {},\n"
                "        )\n",
            ),
        ),
        aims=(RACES, SQS_STANDARD),
        tests=(
            "tests/broker/services/retries/test_move_fences.py::"
            "test_an_old_handle_of_a_message_redelivered_in_place_answers_expired",
        ),
    ),
    Guard(
        "txn-state-fence",
        "a transaction moves (commit, rollback) only from a state it expects "
        "(``transition``: ``#state IN (...)``)",
        (
            Edit(
                "storage/transactions.py",
                """        condition = f"#state IN ({', '.join(expected)})"\n""",
                "        condition = f\"(#state IN ({', '.join(expected)}) OR "
                'attribute_exists(#state))"\n',
            ),
        ),
        aims=(COMMIT,),
    ),
    Guard(
        "lease-save-fence",
        "a save writes (or deletes) a lease only as it read it, or puts a new one only where "
        "none is (``lease_condition``): an ack's ``ADD acked`` landing after the read is not "
        "written over",
        (
            Edit(
                "storage/groups/codec.py",
                "def lease_condition(before: Lease | None) -> dict[str, Any]:\n",
                "def lease_condition(before: Lease | None) -> dict[str, Any]:\n    return {}\n",
            ),
        ),
        aims=(RACES, EXPIRY),
        note="the summary's version condition refuses the racing save: the pair is the row group-"
        "save-fences (defence in depth)",
    ),
    Guard(
        "receive-save-whole",
        "a save puts its leases in the transaction of the summary that hands them out: a "
        "receive that read before another receive leased the same messages and they were "
        "acked leaves no lease of them behind (the slot the ack freed lies below the cursor, "
        "where a lease reads as handed out)",
        (
            Edit(
                "storage/groups/summaries.py",
                WHOLE_SAVE,
                LEASES_FIRST + WHOLE_SAVE,
            ),
        ),
        aims=(STALE,),
        tests=(
            "tests/broker/services/delivery/test_stale_receive.py::"
            "test_a_stale_receive_leaves_no_lease_of_messages_acked_meanwhile[items]",
        ),
        note="with leases on summaries, the harness's stale receives store their lease on "
        "the summary (one write, nothing to reorder) unless a delivery is already out there",
    ),
    Guard(
        "ack-whole-fence",
        "an ack naming everything delivered under a lease removes it in one write only while "
        "it has the handle's id and nothing of it was moved out or on (``_whole_delete``)",
        (
            Edit(
                "storage/groups/lease_acks.py",
                '            "{p}lease_id = :id AND attribute_not_exists({p}moved)'
                ' AND attribute_not_exists({p}gone)"\n',
                '            "({p}lease_id = :id OR attribute_not_exists({p}lease_id)'
                ' OR attribute_exists({p}lease_id))"\n',
            ),
        ),
        aims=(RACES, SQS_STANDARD),
    ),
    Guard(
        "ack-settled-removal-fence",
        "after an ack's ``ADD``, the lease it left settled is removed only as the ``ADD`` "
        "returned it (id and version): a change landing in between keeps it",
        (
            Edit(
                "storage/groups/lease_acks.py",
                "            requests.append(place.request(self._table, lease_unchanged,"
                " as_read(lease), None))\n",
                "            requests.append(\n"
                "                place.request(\n"
                '                    self._table, "{p}lease_id = :id OR {p}v <> :v",'
                " as_read(lease), None\n"
                "                )\n"
                "            )\n",
            ),
        ),
        aims=(RACES, EXPIRY),
        tests=(
            "tests/broker/storage/test_inline_lease.py::"
            "test_a_lease_stored_while_an_ack_removes_the_settled_one_stays",
        ),
        note="the harness's receives never land between an ack's ADD and its removal",
    ),
    Guard(
        "ack-single-fence",
        "an ack of a message moved to a lease of its own (change_invisible) removes that lease "
        "only while it is the one made from this delivery (``lease_id = :id``)",
        (
            Edit(
                "storage/groups/lease_acks.py",
                '            return place.request(self._table, "lease_id = :id",'
                ' {":id": single}, None)\n',
                "            return place.request(\n"
                '                self._table, "lease_id = :id OR attribute_exists(lease_id)",'
                ' {":id": single}, None\n'
                "            )\n",
            ),
        ),
        aims=(RACES, SQS_STANDARD),
        tests=(
            "tests/broker/services/retries/test_immediate_redelivery.py::"
            "test_an_old_handle_of_a_moved_out_message_redelivered_since_acks_nothing",
        ),
    ),
    Guard(
        "inline-lease-fence",
        "a save that changes the lease stored on its summary does so only if that lease is "
        "still as read (``inline_condition``: id and version, or that none is there): an "
        "ack's ``ADD`` or a move landing after the read is not written over",
        (
            Edit(
                "storage/groups/codec.py",
                "def inline_condition(stored: Lease | None) -> tuple[str, dict[str, Any]]:\n",
                "def inline_condition(stored: Lease | None) -> tuple[str, dict[str, Any]]:\n"
                '    return "", {}\n',
            ),
        ),
        aims=(RACES, EXPIRY),
        tests=(
            "tests/broker/storage/test_inline_lease.py::"
            "test_a_save_that_read_the_lease_before_its_ack_removed_it_is_refused",
            "tests/broker/storage/test_inline_lease.py::"
            "test_an_expired_summary_lease_moves_its_message_on_once",
        ),
    ),
    Guard(
        "group-save-fences",
        "a save of a group queue commits only on the summary and the leases as it read them "
        "(``summary_condition`` and ``lease_condition`` together: each row alone survives, "
        "the other one still refusing a racing save)",
        (
            Edit(
                "storage/groups/codec.py",
                "def summary_condition(state: GroupQueueState) -> dict[str, Any]:\n",
                "def summary_condition(state: GroupQueueState) -> dict[str, Any]:\n    return {}\n",
            ),
            Edit(
                "storage/groups/codec.py",
                "def lease_condition(before: Lease | None) -> dict[str, Any]:\n",
                "def lease_condition(before: Lease | None) -> dict[str, Any]:\n    return {}\n",
            ),
        ),
        aims=(RACES, EXPIRY),
    ),
    Guard(
        "part-once",
        "a transaction part is recorded once (``attribute_not_exists(#part)``): a resent part "
        "adds its messages to the count once",
        (
            Edit(
                "storage/transactions.py",
                '"attribute_not_exists(#part) AND (attribute_not_exists(#state) OR "',
                '"(attribute_not_exists(#part) OR attribute_exists(#part)) AND '
                '(attribute_not_exists(#state) OR "',
            ),
        ),
        tests=(
            "tests/broker/services/transactions/test_transactions.py::"
            "test_a_retried_send_stores_nothing_twice",
        ),
        note="the model's part resends carry the same messages, which the overwrite keeps; "
        "a resend with other messages (IdempotencyConflict) is its test's",
    ),
    Guard(
        "subscription-first-record",
        "a group's first receive records its filter only where none is (``not_stored_yet``)",
        (
            Edit(
                "storage/groups/subscriptions.py",
                '**({"ConditionExpression": not_stored_yet} if only_if_new else {}),',
                "**({}),",
            ),
        ),
        tests=(
            "tests/broker/services/delivery/test_sql_filters.py::"
            "test_a_subscribe_landing_inside_a_first_receive_keeps_its_filter",
        ),
        note="without it a first receive overwrites a filter set meanwhile (a subscribe, or "
        "another first receive): the group then skips, and settles, messages the filter that "
        "answered first delivers",
    ),
    Guard(
        "dlq-purge-fence",
        "a redrive appends its letters only if no purge raised the dead-letter floor above "
        "them since it read them (``not_purged_request``)",
        (
            Edit(
                "storage/group_configs.py",
                '"attribute_not_exists(purged_below) OR purged_below <= :o",',
                '"attribute_not_exists(purged_below) OR purged_below <= :o OR purged_below > :o",',
            ),
        ),
        tests=(
            "tests/broker/services/retries/test_dead_letters.py::"
            "test_a_purge_landing_inside_a_redrive_wins",
        ),
        note="without it a redrive that read letters before a purge sends them back after "
        "the purge answered: purged letters delivered again",
    ),
    Guard(
        "offset-reset-fence",
        "an offset reset (and a drop of leases) writes the summary only at the version it "
        "read (``_version_condition``)",
        (
            Edit(
                "storage/group_offsets.py",
                '    """The condition that the summary is still at ``version`` (0: not stored), '
                'and its values."""\n',
                '    """The condition that the summary is still at ``version`` (0: not stored), '
                'and its values."""\n'
                '    return "attribute_not_exists(group_name) OR '
                'attribute_exists(group_name)", {}\n',
            ),
        ),
        aims=(RESET,),
        tests=(
            "tests/broker/services/test_log_reader_and_reset.py::"
            "test_a_lease_saved_inside_a_reset_is_dropped_and_its_messages_redelivered",
            "tests/broker/services/test_log_reader_and_reset.py::"
            "test_a_receive_racing_the_reset_makes_it_read_again",
        ),
        note="without it a lease saved between the reset's read and its write survives: its "
        "handles still ack after the reset answered, and it holds its slot, so the rewound "
        "queue is not delivered",
    ),
    Guard(
        "txn-epoch-fence",
        "a part send, commit or rollback of a transactional producer lands only while the "
        "registration is at its epoch (``fence_request``): a zombie's is refused",
        (
            Edit(
                "storage/transactions.py",
                '        condition, values = "epoch = :epoch", {":epoch": epoch}\n',
                '        condition, values = "epoch = :epoch OR attribute_exists(epoch)", '
                '{":epoch": epoch}\n',
            ),
        ),
        tests=(
            "tests/broker/services/transactions/test_transactions.py::"
            "test_fencing_refuses_the_older_instance",
        ),
    ),
    Guard(
        "sqs-purge-dedup-epoch",
        "SQS: a PurgeQueue starts a FIFO queue's deduplication afresh (the purge time is "
        "part of each deduplication key)",
        (
            Edit(
                "compat/sqs/message_actions.py",
                '    if purged is not None:\n        scope = f"{scope}\\npurged {purged}"\n',
                "",
                package=API,
            ),
        ),
        aims=(PURGE,),
        tests=(
            "tests/compat/test_sqs_fifo_dedup_window.py::"
            "test_a_purge_forgets_the_deduplication_ids_sent_before_it",
        ),
    ),
    Guard(
        "sqs-purge-delayed",
        "SQS: a delayed message sent before a PurgeQueue is deleted when a receive meets it",
        (
            Edit(
                "compat/sqs/message_actions.py",
                "    if purged is None:\n        return received, []\n",
                "    if True:\n        return received, []\n",
                package=API,
            ),
        ),
        aims=(PURGE,),
        tests=("tests/compat/test_sqs_purge_delayed.py",),
    ),
    Guard(
        "sqs-fifo-delete-deadline",
        "SQS FIFO: a delete's conditional writes require the lease holding each message to be "
        "within its deadline (a handle whose visibility timeout passed deletes nothing)",
        (
            Edit(
                "storage/groups/lease_acks.py",
                'NOT_PAST_DEADLINE = "#deadline > :now"\n',
                'NOT_PAST_DEADLINE = "(#deadline > :now OR #deadline <= :now)"\n',
            ),
        ),
        aims=(SQS_FIFO,),
        tests=(
            "tests/broker/services/delivery/test_fifo_groups_apart.py::"
            "test_an_ack_within_visibility_refuses_a_handle_whose_time_passed",
        ),
    ),
    Guard(
        "sqs-fifo-gate-in-flight",
        "SQS FIFO: a group's messages are receivable only up to its first one in flight",
        (
            Edit(
                "rules/orderly.py",
                "        while visible < min(len(entries), budget) and not entries[visible][1]:\n",
                "        while visible < min(len(entries), budget):\n",
            ),
        ),
        aims=(SQS_FIFO,),
    ),
    Guard(
        "sqs-fifo-hold-passed-over",
        "SQS FIFO: a new message a per-group receive passes over (its group cut at the "
        "budget, or not picked) is held below the cursor, to be handed out later",
        (
            Edit(
                "services/delivery/receive.py",
                "        hold = [o for o in plan.hold if o < end] + [o for o in left if o < end]\n",
                "        hold = [o for o in plan.hold if o < end]\n",
            ),
        ),
        aims=(SQS_FIFO,),
        tests=(
            "tests/broker/services/delivery/test_fifo_groups_apart.py::"
            "test_a_message_passed_over_for_a_later_group_comes_in_the_next_receive",
        ),
    ),
    Guard(
        "sqs-fifo-held-release",
        "SQS FIFO: a held message a per-group receive leases leaves ``held``",
        (
            Edit(
                "rules/group_state.py",
                "        self.held = (self.held - delivered) | frozenset(hold)\n",
                "        self.held = self.held | frozenset(hold)\n",
            ),
        ),
        aims=(SQS_FIFO,),
    ),
    Guard(
        "sqs-in-place-deadline",
        "SQS standard: a message comes back in place only once its visibility timeout passed",
        (
            Edit(
                "services/delivery/queue_plan.py",
                "        elif in_place_below is not None:\n"
                "            expired = state.expired_leases(now)\n",
                "        elif in_place_below is not None:\n"
                "            expired = state.expired_leases(now + 10_000)\n",
            ),
        ),
        aims=(SQS_STANDARD,),
        tests=(
            "tests/broker/services/retries/test_immediate_redelivery.py::"
            "test_a_lease_still_running_beside_an_expired_one_stays_invisible",
        ),
    ),
    Guard(
        "sqs-attributes-fence",
        "SQS: a change of a queue's attribute item (attributes, tags, policy, purge mark, "
        "dead-letter sources) is written only over the version it read",
        (Edit("storage/sqs_queues.py", "                    **_fence(current, version),\n", ""),),
        tests=(
            "tests/broker/storage/test_sqs_queue_store.py::"
            "test_a_change_landing_between_the_read_and_the_write_is_kept",
        ),
    ),
    Guard(
        "sqs-attributes-version-token",
        "SQS: the attribute item's version never repeats (a queue deleted and created again "
        "takes no write meant for the old one)",
        (
            Edit(
                "storage/sqs_queues.py",
                '                            "version": uuid.uuid4().hex,\n',
                '                            "version": str(len(wanted)),\n',
            ),
        ),
        tests=(
            "tests/broker/storage/test_sqs_queue_store.py::"
            "test_a_stale_writer_does_not_overwrite_a_queue_created_again",
        ),
    ),
    Guard(
        "sqs-attributes-deleted",
        "SQS: an attribute item deleted with its queue between two attempts is not written again",
        (
            Edit(
                "storage/sqs_queues.py",
                "            if current is None and seen:\n",
                "            if False:\n",
            ),
        ),
        tests=(
            "tests/broker/storage/test_sqs_queue_store.py::"
            "test_an_update_racing_the_queue_s_delete_brings_no_item_back",
        ),
    ),
)


class RunTimedOut(Exception):
    """A child run (a search or a pytest run) passed its time limit."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} timed out after {seconds:.0f} s")
        self.seconds = seconds


@dataclass
class Outcome:
    guard: str
    caught_by: str | None = None
    run: str = ""
    histories: int = 0
    seconds: float = 0.0
    detail: str = ""
    runs: list[str] = field(default_factory=list)
    timed_out: float | None = None
    """Not caught, and a run passed its time limit (the limit, s)."""
    error: str = ""
    """Not caught: a run failed (the harness, not the mutant)."""

    @property
    def verdict(self) -> str:
        """The table's "caught by" cell (without a survivor's note)."""
        if self.caught_by:
            return f"{self.caught_by} ({self.run})"
        if self.error:
            return f"harness error: {self.error}"
        if self.timed_out is not None:
            return f"timed out after {self.timed_out:.0f} s"
        return "SURVIVED"


def scratch_copy(into: Path, root: Path = ROOT) -> Path:
    for part in COPIED:
        source = root / part
        target = into / part
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return into


def mutated(tree: Path, guard: Guard) -> dict[Path, str]:
    """The files of ``tree`` as ``guard``'s edits leave them; stops the run if a snippet
    is not found exactly once (the table is out of date)."""
    texts: dict[Path, str] = {}
    for edit in guard.edits:
        path = tree / edit.package / edit.file
        text = texts.get(path, path.read_text())
        found = text.count(edit.snippet)
        if found != 1:
            raise SystemExit(
                f"guard {guard.name}: snippet found {found} times in {edit.file} "
                f"(the table is out of date):\n{edit.snippet}"
            )
        texts[path] = text.replace(edit.snippet, edit.replacement)
    return texts


def mutate(tree: Path, guard: Guard) -> None:
    for path, text in mutated(tree, guard).items():
        path.write_text(text)


def search(
    tree: Path,
    *,
    seed: int,
    histories: int,
    steps: int,
    rules: str | None,
    baseline: Path | None,
    timeout: float,
) -> dict:
    """One mutant_search.py run on ``tree`` (its packages first on PYTHONPATH)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(tree / p) for p in PATHS)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        "nice", "-n", "10", sys.executable, str(tree / "tests/reliability/mutant_search.py"),
        "--seed", str(seed), "--histories", str(histories), "--steps", str(steps),
    ]  # fmt: skip
    command += ["--rules", rules] if rules else []
    command += ["--baseline", str(baseline)] if baseline else ["--record"]
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": True, "seconds": time.monotonic() - started}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"mutant_search.py failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(lines[-1])
    if not Path(result["broker"]).is_relative_to(tree):
        raise SystemExit(f"cirrusmq_broker came from {result['broker']}, not from {tree}")
    return result


PYTEST = (
    "import sys, pytest\n"
    "code = pytest.main(sys.argv[1:])\n"
    "import cirrusmq_broker\n"
    "print('BROKER=' + cirrusmq_broker.__file__)\n"
    "sys.exit(code)\n"
)
"""pytest in-process, then where the tests' ``cirrusmq_broker`` came from."""


def run_tests(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[bool, str]:
    """Whether ``tests`` pass in ``tree`` (run there, its packages first on PYTHONPATH),
    and the tail of their output."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(tree / p) for p in PATHS)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        "nice", "-n", "10", sys.executable, "-c", PYTEST,
        "-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise RunTimedOut(f"pytest {' '.join(tests)}", timeout) from None
    lines = done.stdout.splitlines()
    broker = next((line[7:] for line in lines if line.startswith("BROKER=")), "")
    if not broker or not Path(broker).is_relative_to(tree):
        raise SystemExit(f"the tests' cirrusmq_broker came from {broker or '?'}, not {tree}")
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest failed ({done.returncode}) in {tree}:\n{done.stdout[-3000:]}")
    failed = [line for line in lines if line.startswith("FAILED")]
    return done.returncode == 0, "\n".join(failed) or "\n".join(lines[-3:])


def tree_digest(root: Path) -> str:
    """Of the sources a baseline depends on: a stored baseline is reused only for them."""
    h = hashlib.sha256()
    for part in ("layers/broker", "tests/reliability"):
        for path in sorted((root / part).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


class Baselines:
    """The unmutated tree's violations per (seed, histories, steps, rules), run once."""

    def __init__(self, tree: Path, folder: Path, args: argparse.Namespace) -> None:
        self.tree, self.folder, self.args = tree, folder, args
        self.digest = tree_digest(tree)
        folder.mkdir(parents=True, exist_ok=True)
        self.passing: dict[tuple[str, ...], tuple[bool, str]] = {}
        self.failed: dict[object, BaseException] = {}
        """The runs that passed their time limit or failed: not run again, each guard
        that needs one is told so."""

    def tests(self, tests: tuple[str, ...]) -> tuple[bool, str]:
        """Whether ``tests`` pass on the unmutated tree (run once per set)."""
        if tests in self.failed:
            raise self.failed[tests]
        if tests not in self.passing:
            try:
                self.passing[tests] = run_tests(self.tree, tests, self.args.timeout)
            except (RunTimedOut, SystemExit) as exc:
                self.failed[tests] = exc
                raise
        return self.passing[tests]

    def get(self, histories: int, rules: str | None) -> Path:
        a = self.args
        key = f"{self.digest}-s{a.seed}-h{histories}-k{a.steps}-{rules or 'all'}"
        path = self.folder / (hashlib.sha256(key.encode()).hexdigest()[:16] + ".json")
        if path in self.failed:
            raise self.failed[path]
        if not path.exists():
            try:
                self._record(path, histories, rules)
            except (RunTimedOut, SystemExit) as exc:
                self.failed[path] = exc
                raise
        return path

    def _record(self, path: Path, histories: int, rules: str | None) -> None:
        """Run the unmutated search of (``histories``, ``rules``) and store it at ``path``."""
        a = self.args
        print(f"baseline: seed {a.seed}, {histories} histories, rules {rules or 'all'} ...",
              flush=True)  # fmt: skip
        result = search(
            self.tree, seed=a.seed, histories=histories, steps=a.steps, rules=rules,
            baseline=None, timeout=a.timeout,
        )  # fmt: skip
        if result.get("timeout"):
            raise RunTimedOut(f"the baseline (rules {rules or 'all'})", a.timeout)
        if result.get("error"):
            raise SystemExit(f"the baseline run failed: {result['error']}")
        result["rules"] = rules
        path.write_text(json.dumps(result))
        shown = result["seen"] or "none"
        print(f"baseline: {result['histories']} histories, {result['seconds']} s, "
              f"violations {shown}", flush=True)  # fmt: skip


def run_guard(
    guard: Guard, pristine: Path, baselines: Baselines, args: argparse.Namespace
) -> Outcome:
    outcome = Outcome(guard.name)
    if guard.tests and not guard.aims:
        return run_guard_tests(guard, pristine, baselines, args)
    runs = [] if args.aimed_only and guard.aims else [("general", None, args.histories)]
    if not args.general_only:
        runs += [(label, rules, args.aimed_histories) for label, rules in guard.aims]
    with tempfile.TemporaryDirectory(prefix=f"mutant-{guard.name}-") as scratch:
        tree = scratch_copy(Path(scratch), pristine)
        mutate(tree, guard)
        for label, rules, histories in runs:
            try:
                baseline = baselines.get(histories, rules)
            except RunTimedOut as exc:  # no baseline: this run cannot count a catch
                outcome.runs.append(f"{label}: {exc}")
                outcome.timed_out = exc.seconds
                continue
            result = search(
                tree, seed=args.seed, histories=histories, steps=args.steps, rules=rules,
                baseline=baseline, timeout=args.timeout,
            )  # fmt: skip
            outcome.seconds += result["seconds"]
            if result.get("timeout"):
                outcome.runs.append(f"{label}: timed out after {args.timeout:.0f} s")
                outcome.timed_out = args.timeout
                continue
            outcome.histories += result["histories"]
            caught = result["caught"]
            outcome.runs.append(
                f"{label}: {'caught by ' + caught['kind'] if caught else 'survived'} after "
                f"{result['histories']} histories, {result['seconds']} s"
                + (f" (harness error: {result['error']})" if result.get("error") else "")
            )
            if caught:
                outcome.caught_by, outcome.run = caught["kind"], label
                outcome.detail = caught["detail"] + "\n" + caught["log"][-2500:]
                outcome.timed_out = None
                break
    if outcome.caught_by or not guard.tests:
        return outcome
    tested = run_guard_tests(guard, pristine, baselines, args)  # the search missed it
    tested.runs[:0] = outcome.runs
    tested.histories, tested.seconds = outcome.histories, tested.seconds + outcome.seconds
    if tested.timed_out is None and not tested.caught_by:
        tested.timed_out = outcome.timed_out
    return tested


def run_guard_tests(
    guard: Guard, pristine: Path, baselines: Baselines, args: argparse.Namespace
) -> Outcome:
    """The guard's tests on the unmutated copy (they must pass), then on the mutant."""
    outcome = Outcome(guard.name)
    started = time.monotonic()
    passed, tail = baselines.tests(guard.tests)
    if not passed:  # no catcher: reported as a survivor, with why
        outcome.runs.append(f"its tests fail on the unmutated tree: {tail}")
        return outcome
    with tempfile.TemporaryDirectory(prefix=f"mutant-{guard.name}-") as scratch:
        tree = scratch_copy(Path(scratch), pristine)
        mutate(tree, guard)
        passed, tail = run_tests(tree, guard.tests, args.timeout)
    outcome.seconds = time.monotonic() - started
    label = "tests " + " ".join(t.rsplit("/", 1)[-1] for t in guard.tests)
    if passed:
        outcome.runs.append(f"{label}: survived (the tests pass on the mutant)")
    else:
        failed = tail.splitlines()[0].removeprefix("FAILED ").split(" - ")[0]
        outcome.caught_by, outcome.run = f"test {failed.rsplit('/', 1)[-1]}", "test"
        outcome.runs.append(f"{label}: caught by {failed}")
        outcome.detail = tail
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--guard", action="append", help="only these guards (repeatable)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--histories", type=int, default=15, help="of the general search")
    parser.add_argument("--aimed-histories", type=int, default=20, help="of each aimed run")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--jobs", type=int, default=1, help="guards searched at once")
    parser.add_argument("--baseline-dir", default=str(Path(tempfile.gettempdir()) / "cmq-mut"))
    parser.add_argument("--general-only", action="store_true", help="no aimed runs")
    parser.add_argument("--aimed-only", action="store_true", help="only the aimed runs")
    parser.add_argument("--details", action="store_true", help="print each catch's history")
    parser.add_argument("--list", action="store_true", help="list the guards and exit")
    args = parser.parse_args(argv)
    if args.list:
        for g in GUARDS:
            print(f"{g.name}: {g.protects}")
        return 0
    chosen = [g for g in GUARDS if not args.guard or g.name in args.guard]
    unknown = set(args.guard or ()) - {g.name for g in GUARDS}
    if unknown:
        raise SystemExit(f"unknown guards: {sorted(unknown)}")
    for guard in GUARDS:  # every snippet is checked, whichever guards run
        mutated(ROOT, guard)
    with tempfile.TemporaryDirectory(prefix="mutant-baseline-") as scratch:
        # one snapshot of the tree: edits made while the run goes on do not leak into it
        pristine = scratch_copy(Path(scratch) / "base")
        baselines = Baselines(pristine, Path(args.baseline_dir), args)
        searched = [g for g in chosen if g.aims or not g.tests]
        specs = set() if args.aimed_only or not searched else {(args.histories, None)}
        if not args.general_only:
            specs |= {(args.aimed_histories, rules) for g in searched for _, rules in g.aims}
        with ThreadPoolExecutor(args.jobs) as pool:  # the baselines first, then the guards

            def baseline(spec: tuple[int, str | None]) -> None:
                try:
                    baselines.get(*spec)
                except (RunTimedOut, SystemExit) as exc:  # told in the rows that need it
                    print(f"baseline: {exc}", flush=True)

            list(pool.map(baseline, sorted(specs, key=str)))

            def one(guard: Guard) -> Outcome:
                outcome = guarded_run(guard, pristine, baselines, args)
                text = [f"--- {guard.name}: {guard.protects}"]
                text += [f"    {line}" for line in outcome.runs]
                if args.details and outcome.detail:
                    text.append(outcome.detail)
                print("\n".join(text), flush=True)
                return outcome

            outcomes = list(pool.map(one, chosen))
    return print_table(outcomes, chosen)


def guarded_run(
    guard: Guard, pristine: Path, baselines: Baselines, args: argparse.Namespace
) -> Outcome:
    """``run_guard``, with a run past its time limit or a failed run as the guard's
    outcome (not caught) instead of the end of the whole table."""
    started = time.monotonic()
    try:
        return run_guard(guard, pristine, baselines, args)
    except RunTimedOut as exc:
        outcome = Outcome(guard.name, timed_out=exc.seconds, runs=[str(exc)])
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - reported in its row
        error = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else repr(exc)
        outcome = Outcome(guard.name, error=error, runs=[f"harness error: {exc}"])
    outcome.seconds = time.monotonic() - started
    return outcome


def print_table(outcomes: list[Outcome], chosen: list[Guard]) -> int:
    """The closing table and its count; 1 if a guard was not caught."""
    print("\nguard | caught by | histories needed | seconds")
    print("---|---|---|---")
    for o, g in zip(outcomes, chosen, strict=True):
        note = f" -- {g.note}" if g.note and o.verdict == "SURVIVED" else ""
        print(f"{o.guard} | {o.verdict}{note} | {o.histories} | {o.seconds:.0f}")
    survivors = [o.guard for o in outcomes if not o.caught_by]
    timed_out = [o.guard for o in outcomes if not o.caught_by and o.timed_out is not None]
    print(f"\n{len(outcomes) - len(survivors)} of {len(outcomes)} guards caught"
          + (f"; not caught: {', '.join(survivors)}" if survivors else "")
          + (f" (timed out: {', '.join(timed_out)})" if timed_out else ""))  # fmt: skip
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())
