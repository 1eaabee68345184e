"""Dead-letter redrive sends each letter back exactly once: by id, by cursor, by topic, in
any order, under crashes at any AWS call and re-runs whose inputs changed in between."""

from __future__ import annotations

import importlib.util
import itertools
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from broker_helpers import Crash, crashing_at, send, sent_and_redriven, stream_count
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.group_configs import GroupConfigStore
from cirrusmq_broker.storage.move_records import MoveRecords
from ulid import ULID


def dead_letters(broker, topic: str, *bodies: bytes) -> list:
    """``bodies`` sent to ``topic`` (one queue) and dead-lettered in one DLQ batch."""
    broker.admin.create_topic(topic, queues=1)
    broker.retries.set_max_delivery_attempts("g", 1)
    send(broker, topic, *bodies)
    got = broker.consume.receive("g", topic, max_messages=100)
    broker.retries.nack("g", [m.receipt_handle for m in got])
    letters = broker.dead_letters.list("g", topic=topic).dead_letters
    assert len(letters) == len(bodies)
    return letters


def redelivered(broker, topic: str) -> list[bytes]:
    """Bodies the group receives from ``topic`` now (each redriven copy is delivered)."""
    got = broker.consume.receive("g", topic, max_messages=100)
    return sorted(m.message.body for m in got)


def test_by_id_then_a_crashed_cursor_redrive_then_by_id_sends_each_back_once(
    broker, clock, monkeypatch
):
    p1, p2 = dead_letters(broker, "t", b"p1", b"p2")
    assert broker.dead_letters.redrive("g", message_ids=[p1.message.message_id]).redriven == 1
    with monkeypatch.context() as patch:  # the cursor redrive dies before its cursor moves

        def crash(*args, **kwargs):
            raise Crash()

        patch.setattr(GroupConfigStore, "advance_cursor", crash)
        with pytest.raises(Crash):
            broker.dead_letters.redrive("g")
    again = broker.dead_letters.redrive("g", message_ids=[p2.message.message_id])
    assert again.redriven == 0  # the crashed cursor redrive sent it back already
    assert broker.dead_letters.redrive("g").redriven == 0
    assert sent_and_redriven(broker, "t") == 4  # 2 sent + each redriven once
    assert redelivered(broker, "t") == [b"p1", b"p2"]
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True, True]


@pytest.mark.parametrize("first", ["cursor", "topic", "id"])
def test_a_redrive_crashed_at_any_call_then_other_redrives_send_each_back_once(
    broker, clock, first
):
    """Each AWS call of a first redrive fails in turn; then redrives by id of each letter,
    by topic and of everything run: every letter is sent back exactly once."""
    topics = itertools.count()

    def scene():
        name = f"t{next(topics)}"
        letters = dead_letters(broker, name, b"a", b"b", b"c")
        ids = [d.message.message_id for d in letters]
        action = {
            "cursor": lambda: broker.dead_letters.redrive("g"),
            "topic": lambda: broker.dead_letters.redrive("g", topic=name),
            "id": lambda: broker.dead_letters.redrive("g", message_ids=ids[:2]),
        }[first]
        return name, ids, action

    def rest(name: str, ids: list[str]) -> None:
        broker.dead_letters.redrive("g", message_ids=[ids[1]])
        broker.dead_letters.redrive("g", message_ids=[ids[2]])
        broker.dead_letters.redrive("g", topic=name)
        broker.dead_letters.redrive("g")
        broker.dead_letters.redrive("g", message_ids=ids)
        assert sent_and_redriven(broker, name) == 6, "a letter was lost or sent back twice"
        assert redelivered(broker, name) == [b"a", b"b", b"c"]

    name, ids, action = scene()
    seen: list[str] = []
    remove = observe_calls(lambda service, operation, _: seen.append(operation))
    try:
        action()
    finally:
        remove()
    rest(name, ids)
    for n in range(len(seen)):
        name, ids, action = scene()
        if crashing_at(n, action):
            rest(name, ids)


def _landing_before_first_append(monkeypatch, action) -> list:
    """Run ``action`` once, just before the first redrive append is written (another
    request landing between the redrive's reads and its append)."""
    from cirrusmq_broker.services.moves import MoveAppender

    real = MoveAppender.store  # every move's append goes through it
    landed: list = []

    def store(self, topic, queue, messages, stamp, *args, **kwargs):
        if stamp.producer_id.startswith("~redrive") and not landed:
            landed.append(None)
            landed[0] = action()
        return real(self, topic, queue, messages, stamp, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "store", store)
    return landed


def test_a_redrive_by_id_landing_inside_a_cursor_redrive_sends_each_back_once(
    broker, clock, monkeypatch
):
    p1, p2 = dead_letters(broker, "t", b"p1", b"p2")
    landed = _landing_before_first_append(
        monkeypatch, lambda: broker.dead_letters.redrive("g", message_ids=[p2.message.message_id])
    )
    result = broker.dead_letters.redrive("g")
    assert landed[0].redriven == 1
    assert result.redriven == 1  # p1 only: its first claim lost to the redrive by id
    assert sent_and_redriven(broker, "t") == 4
    assert redelivered(broker, "t") == [b"p1", b"p2"]


def test_a_purge_landing_inside_a_redrive_wins(broker, clock, monkeypatch):
    """A purge that answered before the redrive's append sends nothing of what it purged."""
    p1, p2 = dead_letters(broker, "t", b"p1", b"p2")
    landed = _landing_before_first_append(monkeypatch, lambda: broker.dead_letters.purge("g"))
    result = broker.dead_letters.redrive("g", message_ids=[p1.message.message_id])
    assert landed == [2]
    assert result.redriven == 0
    assert sent_and_redriven(broker, "t") == 2
    assert broker.dead_letters.list("g").dead_letters == []
    assert broker.dead_letters.redrive("g").redriven == 0
    assert redelivered(broker, "t") == []


def test_a_redrive_costs_no_aws_call_per_letter(broker, clock):
    """A DLQ batch of 50 letters of one origin is sent back by one append, whatever the
    way (all, or by ids)."""
    dead_letters(broker, "t", *[b"m%d" % i for i in range(50)])
    dead_letters(broker, "u", *[b"n%d" % i for i in range(50)])
    ids = [d.message.message_id for d in broker.dead_letters.list("g", topic="u").dead_letters]
    for action in (
        lambda: broker.dead_letters.redrive("g"),
        lambda: broker.dead_letters.redrive("g", message_ids=ids),
    ):
        seen: list[str] = []
        remove = observe_calls(lambda service, operation, _, seen=seen: seen.append(operation))
        try:
            action()
        finally:
            remove()
        # a few reads, then per DLQ batch: its claims, the object, the head, the append
        # (with the claim), the cursor: ~13 calls for 100 letters
        assert len(seen) < 20, seen
    assert sent_and_redriven(broker, "t") == 100 and sent_and_redriven(broker, "u") == 100


def test_a_letter_whose_topic_was_deleted_is_skipped_then_sent_back_once_it_exists(broker, clock):
    from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS

    [letter] = dead_letters(broker, "t", b"orphan")
    broker.admin.delete_topic("t")
    result = broker.dead_letters.redrive("g")
    assert (result.redriven, result.skipped) == (0, 1)
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [False]
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics() == ["t"]
    broker.admin.create_topic("t", queues=1)
    broker.catalog.forget("t")
    assert broker.dead_letters.redrive("g", message_ids=[letter.message.message_id]).redriven == 1
    assert broker.dead_letters.redrive("g", message_ids=[letter.message.message_id]).redriven == 0
    assert broker.dead_letters.redrive("g").redriven == 0
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True]
    assert redelivered(broker, "t") == [b"orphan"]


# ---------------------------------------------------------- upgrade from the previous release
REPO = Path(__file__).resolve().parents[4]
PREVIOUS_RELEASE = "c8152e5"
"""The release before redrive claims (its dead-letter service ran on the same tables)."""

MOVED_SINCE = {"from ..retry_rules import": "from ..rules.retries import"}
"""The previous release's imports of modules that moved since, and where they are now."""


def previous_dead_letters(broker):
    """The previous release's dead-letter service on the same tables (a deployment that
    redrove letters before the upgrade)."""
    source = subprocess.check_output(
        [
            "git",
            "show",
            f"{PREVIOUS_RELEASE}:layers/broker/cirrusmq_broker/services/dead_letters.py",
        ],
        cwd=REPO,
    ).decode()
    for before, now in MOVED_SINCE.items():
        source = source.replace(before, now)
    name = "cirrusmq_broker.services._dead_letters_previous_release"
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "cirrusmq_broker.services"
    sys.modules[name] = module
    exec(compile(source, "dead_letters@" + PREVIOUS_RELEASE, "exec"), module.__dict__)
    new = broker.dead_letters
    return module.DeadLetterService(
        topics=new._topics,
        moves=new._moves,
        index=new._index,
        heads=new._heads,
        reader=new._reader,
        configs=new._configs,
        clock=new._clock,
        records=MoveRecords(broker._dynamodb, broker.settings.producers_table),
    )


def test_letters_redriven_before_the_upgrade_are_not_sent_back_again(broker, clock):
    letters = dead_letters(broker, "t", b"a", b"b")
    ids = [d.message.message_id for d in letters]
    assert previous_dead_letters(broker).redrive("g").redriven == 2
    assert stream_count(broker, "t#") == 4  # 2 sent + each redriven once, before the upgrade
    # the deployment is upgraded; the operator redrives again (by topic, by id)
    broker.dead_letters.redrive("g", topic="t")
    broker.dead_letters.redrive("g", message_ids=ids)
    assert sent_and_redriven(broker, "t") == 4, "a letter redriven before the upgrade sent twice"


def test_listing_marks_letters_redriven_before_the_upgrade(broker, clock):
    dead_letters(broker, "t", b"a", b"b")
    previous = previous_dead_letters(broker)
    assert previous.redrive("g").redriven == 2
    assert [d.redriven for d in previous.list("g").dead_letters] == [True, True]
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True, True]


def test_letter_redriven_by_id_before_the_upgrade_is_not_sent_back_by_a_cursor(broker, clock):
    a, _ = dead_letters(broker, "t", b"a", b"b")
    previous = previous_dead_letters(broker)
    assert previous.redrive("g", message_ids=[a.message.message_id]).redriven == 1
    assert stream_count(broker, "t#") == 3
    broker.dead_letters.redrive("g")
    assert sent_and_redriven(broker, "t") == 4, "the letter redriven by id was sent back again"


def test_a_letter_the_previous_release_skipped_for_its_deleted_topic_is_not_marked(broker, clock):
    """Its cursor passed the letter, but sent nothing: it stays redrivable by id."""
    from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS

    [letter] = dead_letters(broker, "t", b"orphan")
    broker.admin.delete_topic("t")
    previous = previous_dead_letters(broker)
    result = previous.redrive("g")
    assert (result.redriven, result.skipped) == (0, 1)
    clock.advance(PURGE_DELAY_SECONDS + 1)
    assert broker.janitor.purge_deleted_topics() == ["t"]
    broker.admin.create_topic("t", queues=1)
    broker.catalog.forget("t")
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [False]
    assert broker.dead_letters.redrive("g", message_ids=[letter.message.message_id]).redriven == 1
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True]
    assert redelivered(broker, "t") == [b"orphan"]


def test_a_letter_the_previous_release_redrove_with_its_batch_is_recognised_alone(broker, clock):
    """That release's cursor redrive recorded one append per DLQ batch and origin queue
    (sequence: its first letter): a later letter of it, listed or redriven by id on its
    own, counts as sent back."""
    _, b = dead_letters(broker, "t", b"a", b"b")
    assert previous_dead_letters(broker).redrive("g").redriven == 2
    listed = broker.dead_letters.list("g", start=b.offset).dead_letters
    assert [(d.offset, d.redriven) for d in listed] == [(b.offset, True)]
    assert broker.dead_letters.redrive("g", message_ids=[b.message.message_id]).redriven == 0
    assert sent_and_redriven(broker, "t") == 4


def _one_dead_letter(broker, *bodies: bytes):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", *bodies)
    broker.retries.set_max_delivery_attempts("g", 1)
    got = broker.consume.receive("g", "t", max_messages=10)
    broker.retries.nack("g", [m.receipt_handle for m in got])
    return broker.dead_letters.list("g").dead_letters


def test_redrive_all_then_by_id_then_by_topic_sends_back_once(broker, clock):
    [dead] = _one_dead_letter(broker, b"poison")
    assert not dead.redriven
    assert broker.dead_letters.redrive("g").redriven == 1
    [listed] = broker.dead_letters.list("g").dead_letters
    assert listed.redriven
    again = broker.dead_letters.redrive("g", message_ids=[dead.message.message_id])
    assert again.redriven == 0
    assert broker.dead_letters.redrive("g", topic="t").redriven == 0
    assert sent_and_redriven(broker, "t") == 2  # the original and one redrive


def test_redrive_by_id_then_all_sends_back_once(broker, clock):
    first, second = _one_dead_letter(broker, b"a", b"b")
    by_id = broker.dead_letters.redrive("g", message_ids=[first.message.message_id])
    assert by_id.redriven == 1
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True, False]
    assert broker.dead_letters.redrive("g").redriven == 1  # only the other one
    assert sent_and_redriven(broker, "t") == 4
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True, True]


def test_redrive_records_are_kept_as_long_as_the_dead_letters(broker, clock):
    from cirrusmq_broker.rules.retries import DLQ_RETENTION_HOURS

    _one_dead_letter(broker, b"poison")
    broker.dead_letters.redrive("g")
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.producers_table)["Items"]
    redrives = [i for i in items if i["producer_key"]["S"].startswith("~redrive.")]
    assert redrives
    for item in redrives:
        kept = int(item["expires_at"]["N"]) - clock.now // 1000
        assert kept >= DLQ_RETENTION_HOURS * 3600


def test_redrive_by_id_examines_a_bounded_part_of_the_dlq_per_call(broker, clock, monkeypatch):
    from cirrusmq_broker.services import dead_letters as dead_letters_module

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b", b"c")
    broker.retries.set_max_delivery_attempts("g", 1)
    for m in broker.consume.receive("g", "t", max_messages=10):
        broker.retries.nack("g", [m.receipt_handle])  # one DLQ batch each
    letters = broker.dead_letters.list("g").dead_letters
    assert len(letters) == 3
    monkeypatch.setattr(dead_letters_module, "MAX_LIST_SCAN", 1)
    wanted = [letters[2].message.message_id]
    calls, start, redriven = 0, 0, 0
    while True:
        result = broker.dead_letters.redrive("g", message_ids=wanted, start=start)
        calls, redriven = calls + 1, redriven + result.redriven
        if result.done:
            break
        start = result.next_offset
    assert (calls, redriven) == (3, 1)
    # a topic filter matching nothing: a cursor redrive stops after the cap too
    first = broker.dead_letters.redrive("g", topic="other")
    assert (first.redriven, first.done) == (0, False)


def test_a_dead_letter_is_redriven_by_its_id_in_uuid_form(broker, clock):
    """An operator pastes a dead letter's id as an SQS client shows it (the ULID's 128 bits
    in UUID form): that letter is sent back."""
    p1, _ = dead_letters(broker, "t", b"p1", b"p2")
    spelled = str(ULID.from_str(p1.message.message_id).to_uuid())
    assert broker.dead_letters.redrive("g", message_ids=[spelled]).redriven == 1
    assert redelivered(broker, "t") == [b"p1"]
