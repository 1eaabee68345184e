"""Regressions of the retries review: duplicates from races between nack, expiry and
redelivery, backoff skipped past the per-pass move cap, internal topics in handles."""

from __future__ import annotations

import boto3
import pytest
from broker_helpers import send
from cirrusmq_broker.services import optimistic
from cirrusmq_broker.services import retries as retries_module
from cirrusmq_broker.services.delivery import receive as receive_module
from cirrusmq_broker.services.moves import MoveAppender
from cirrusmq_broker.storage.groups import GroupStateStore
from cirrusmq_broker.storage.groups.move_settles import MoveSettles


class Crash(BaseException):
    pass


def stream_count(broker, prefix: str) -> int:
    """Messages appended to the streams whose name starts with ``prefix``."""
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.log_index_table)["Items"]
    return sum(int(i["count"]["N"]) for i in items if i["stream"]["S"].startswith(prefix))


def test_a_nack_racing_the_expiry_of_its_lease_is_refused(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    real = MoveAppender.append
    nacked = []

    def append(self, topic, queue, messages, stamp, digest=None, **kwargs):
        out = real(self, topic, queue, messages, stamp, digest, **kwargs)
        if stamp.producer_id.startswith("~expire") and not nacked:
            # the consumer's nack arrives while the receive is between append and save
            nacked.append(broker.retries.nack("g", [m.receipt_handle]))
        return out

    monkeypatch.setattr(MoveAppender, "append", append)
    broker.consume.receive("g", "t")
    assert [o.status for o in nacked[0]] == ["expired"]
    assert stream_count(broker, "retry.") == 1


def test_a_nack_within_the_margin_of_the_deadline_is_refused(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y")
    m, n = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    clock.advance(10 - retries_module.NACK_MARGIN_SECONDS)
    assert [o.status for o in broker.retries.nack("g", [m.receipt_handle])] == ["expired"]
    assert stream_count(broker, "retry.") == 0
    clock.advance(retries_module.NACK_MARGIN_SECONDS)
    broker.consume.receive("g", "t")  # the expiry moves both, once
    assert stream_count(broker, "retry.") == 2


def test_expiry_crash_then_nack_stores_one_retry_copy(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    with monkeypatch.context() as patch:  # the receive dies after the retry append

        def crash(self, state):
            raise Crash()

        patch.setattr(GroupStateStore, "save", crash)
        with pytest.raises(Crash):
            broker.consume.receive("g", "t")
    assert stream_count(broker, "retry.") == 1
    out = broker.retries.nack("g", [m.receipt_handle])  # right at the deadline
    assert [o.status for o in out] == ["expired"]
    broker.consume.receive("g", "t")  # the re-run of the expiry
    assert stream_count(broker, "retry.") == 1
    clock.advance(60)
    got = broker.consume.receive("g", "t", max_messages=10)
    assert [r.delivery_attempt for r in got] == [2]


def test_a_nack_whose_settle_fails_answers_expired(broker, clock, monkeypatch):
    from dataclasses import replace

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=60)
    real = MoveSettles.settle_request

    def changed_since_read(self, state, before, after):  # as if written by another each time
        return real(self, state, replace(before, version=before.version + 100), after)

    monkeypatch.setattr(MoveSettles, "settle_request", changed_since_read)
    assert [o.status for o in broker.retries.nack("g", [m.receipt_handle])] == ["expired"]
    assert stream_count(broker, "retry.") == 0  # the settle and the move commit together


def test_a_contended_expiry_skips_the_queue_instead_of_redelivering_in_place(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    real = GroupStateStore.save
    losses = {"n": 0}

    def save(self, state, *more):
        if losses["n"] < optimistic.SAVE_ATTEMPTS:
            losses["n"] += 1
            return False  # another consumer's write won the race each time
        return real(self, state, *more)

    monkeypatch.setattr(GroupStateStore, "save", save)
    assert broker.consume.receive("g", "t", invisible_seconds=10) == []
    monkeypatch.setattr(GroupStateStore, "save", real)
    clock.advance(10)
    broker.consume.receive("g", "t")  # the next pass moves it, under the same stamp
    assert stream_count(broker, "retry.") == 1


def test_more_expired_leases_than_one_pass_moves_all_wait_for_backoff(broker, clock, monkeypatch):
    # the pass's time bound (tested on its own) must not cut it short on a loaded machine
    monkeypatch.setattr(receive_module, "MIN_PASS_SECONDS", 300.0)
    broker.admin.create_topic("t", queues=1)
    for i in range(retries_module.MAX_MOVES_PER_PASS + 5):
        send(broker, "t", b"%d" % i)
    for _ in range(retries_module.MAX_MOVES_PER_PASS + 5):
        broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
    clock.advance(10)
    got = broker.consume.receive("g", "t", max_messages=32)
    assert got == []  # none in place (no backoff skipped)
    assert stream_count(broker, "retry.") == retries_module.MAX_MOVES_PER_PASS
    broker.consume.receive("g", "t", max_messages=32)
    assert stream_count(broker, "retry.") == retries_module.MAX_MOVES_PER_PASS + 5


def test_change_invisible_of_a_retry_delivery(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [m] = broker.consume.receive("g", "t", invisible_seconds=10)
    broker.retries.nack("g", [m.receipt_handle])
    clock.advance(10)
    [again] = broker.consume.receive("g", "t", invisible_seconds=10)
    assert again.delivery_attempt == 2
    changed = broker.consume.change_invisible("g", again.receipt_handle, 60)
    assert changed.message.topic == "t"
    assert changed.message.message_id == m.message.message_id
    assert changed.delivery_attempt == 2
    clock.advance(30)
    assert broker.consume.receive("g", "t") == []  # still invisible
    acked = broker.consume.ack("g", [changed.receipt_handle])
    assert [o.status.value for o in acked] == ["acked"]


def test_a_slow_orderly_batch_renewed_by_its_consumer_is_never_redelivered(broker, clock):
    """The SDK's side of a slow orderly batch (cirrusmq.orderly): ack in groups, extend the
    whole FIFO lease before it ends; the old handles still ack."""
    from cirrusmq_broker.model import MessageType
    from cirrusmq_broker.services.produce import MessageInput

    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"%d" % i, message_group="k") for i in range(3)])
    batch = broker.consume.receive("g", "f", max_messages=3, invisible_seconds=10, client_id="c1")
    assert len(batch) == 3
    acked = broker.consume.ack("g", [batch[0].receipt_handle])
    assert [o.status.value for o in acked] == ["acked"]
    clock.advance(6)
    broker.consume.change_invisible("g", batch[1].receipt_handle, 10)
    clock.advance(6)  # past the first deadline
    assert broker.consume.receive("g", "f", max_messages=3, client_id="c1") == []
    acked = broker.consume.ack("g", [r.receipt_handle for r in batch[1:]])
    assert [o.status.value for o in acked] == ["acked", "acked"]
    clock.advance(60)
    assert broker.consume.receive("g", "f", max_messages=3, client_id="c1") == []
    assert broker.dead_letters.list("g").dead_letters == []


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
    assert stream_count(broker, "t#") == 2  # the original and one redrive


def test_redrive_by_id_then_all_sends_back_once(broker, clock):
    first, second = _one_dead_letter(broker, b"a", b"b")
    by_id = broker.dead_letters.redrive("g", message_ids=[first.message.message_id])
    assert by_id.redriven == 1
    assert [d.redriven for d in broker.dead_letters.list("g").dead_letters] == [True, False]
    assert broker.dead_letters.redrive("g").redriven == 1  # only the other one
    assert stream_count(broker, "t#") == 4
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


def test_an_oversized_registration_is_refused_with_a_4xx_and_nothing_stored(broker, clock):
    from cirrusmq_broker.rules.membership import RegistryTooLarge

    topics = [f"t{i:02d}" + "x" * 120 for i in range(32)]
    for t in topics:
        broker.admin.create_topic(t, queues=1)
    expression = " || ".join(f"{i:02d}" + "y" * 126 for i in range(63))
    subs = {t: expression for t in topics}
    broker.membership.heartbeat("g", "c1", subs)
    with pytest.raises(RegistryTooLarge) as info:
        broker.membership.heartbeat("g", "c2", subs)
    assert info.value.http_status == 400
    assert [c.client_id for c in broker.membership.consumers("g")] == ["c1"]


def test_a_heartbeat_writes_only_when_half_its_timeout_has_passed(broker, clock):
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("t", queues=1)
    writes: list[str] = []
    remove = observe_calls(
        lambda service, op, _: writes.append(op) if op in ("PutItem", "UpdateItem") else None
    )
    try:
        broker.membership.heartbeat("g", "c1", {"t": "*"}, heartbeat_timeout_seconds=60)
        assert writes == ["PutItem"]
        for _ in range(2):
            clock.advance(10)
            status = broker.membership.heartbeat(
                "g", "c1", {"t": "*"}, heartbeat_timeout_seconds=60
            )
        assert writes == ["PutItem"]  # 20 s in: still registered for 40 s more
        assert status.expires_at == clock.now + 40_000
        clock.advance(11)
        broker.membership.heartbeat("g", "c1", {"t": "*"}, heartbeat_timeout_seconds=60)
        assert writes == ["PutItem", "PutItem"]
        broker.membership.heartbeat("g", "c1", {"t": "tag"}, heartbeat_timeout_seconds=60)
        assert len(writes) == 3  # a changed subscription is written at once
    finally:
        remove()


def test_an_expiry_rerun_after_max_attempts_changed_stores_nothing_twice(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    broker.retries.set_max_delivery_attempts("g", 2)
    broker.consume.receive("g", "t", invisible_seconds=10)
    clock.advance(10)
    with monkeypatch.context() as patch:  # the expiry dies after its append (to a retry level)

        def crash(self, state):
            raise Crash()

        patch.setattr(GroupStateStore, "save", crash)
        with pytest.raises(Crash):
            broker.consume.receive("g", "t")
    assert stream_count(broker, "retry.") == 1
    broker.retries.set_max_delivery_attempts("g", 1)  # the re-run's target is the DLQ now
    broker.consume.receive("g", "t")
    assert stream_count(broker, "retry.") + stream_count(broker, "dlq.") == 1


def test_a_deregistration_writes_only_the_queues_it_holds(broker, clock):
    from cirrusmq_broker.model import MessageType
    from cirrusmq_broker.services.produce import MessageInput
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("f", queues=8, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"x", message_group="k")])
    broker.membership.heartbeat("g", "a", {"f": "*"}, orderly=True)
    got = broker.consume.receive("g", "f", max_messages=8, client_id="a")
    assert len(got) == 1
    updates: list[str] = []
    remove = observe_calls(
        lambda service, op, _: updates.append(op) if op == "UpdateItem" else None
    )
    try:
        assert broker.membership.deregister("g", "a") == 1
    finally:
        remove()
    assert updates == ["UpdateItem"]  # the one lock; not one write per queue
    states, _ = broker.states.list_group("g")
    assert all(s.lock_owner is None for s in states)


def test_a_deregistration_needs_the_permission_for_the_members_topics(broker, clock):
    from cirrusmq_broker.errors import AccessDenied

    broker.admin.create_topic("t", queues=1)
    broker.membership.heartbeat("g", "a", {"t": "*"})
    with pytest.raises(AccessDenied):
        broker.membership.deregister("g", "a", may_subscribe=lambda topic: topic != "t")
    assert [c.client_id for c in broker.membership.consumers("g")] == ["a"]
    assert broker.membership.deregister("g", "a", may_subscribe=lambda topic: True) == 0
    assert broker.membership.consumers("g") == []


def test_a_fifo_queue_in_flight_is_rechecked_less_and_less_often(broker, clock, monkeypatch):
    from types import SimpleNamespace

    from cirrusmq_broker.model import MessageType
    from cirrusmq_broker.services.delivery import queue_plan
    from cirrusmq_broker.services.produce import MessageInput
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("f", queues=1, message_type=MessageType.FIFO.value)
    broker.produce.send("f", [MessageInput(b"%d" % i, message_group="k") for i in range(2)])
    assert broker.consume.receive("g", "f", max_messages=1, invisible_seconds=60, client_id="a")
    seconds = [1000.0]
    fake = SimpleNamespace(monotonic=lambda: seconds[0], sleep=lambda s: None)
    monkeypatch.setattr(queue_plan, "time", fake)
    queries: list[str] = []
    remove = observe_calls(lambda service, op, _: queries.append(op) if op == "Query" else None)
    try:
        for _ in range(20):  # a poll a second for 20 s while the delivery is in flight
            assert broker.consume.receive("g", "f", client_id="a") == []
            seconds[0] += 1.0
    finally:
        remove()
    assert len(queries) <= 11  # re-read after 1, then every 2 s; not every second


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


def test_a_repeated_ack_of_a_message_not_moved_with_its_lease_is_acked(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    assert [o.status.value for o in broker.consume.ack("g", [a.receipt_handle])] == ["acked"]
    clock.advance(10)
    broker.consume.receive("g", "t")  # b moves to the retry topic
    assert stream_count(broker, "retry.") == 1
    again = broker.consume.ack("g", [a.receipt_handle, b.receipt_handle])
    assert [o.status.value for o in again] == ["acked", "expired"]


def test_a_nack_of_many_leases_of_one_queue_is_one_append(broker, clock):
    from cirrusmq_broker.storage.clients import observe_calls

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", *[b"%d" % i for i in range(10)])
    singles = [
        broker.consume.receive("g", "t", max_messages=1, invisible_seconds=60)[0] for _ in range(10)
    ]
    puts: list[str] = []
    remove = observe_calls(lambda service, op, _: puts.append(op) if op == "PutObject" else None)
    try:
        out = broker.retries.nack("g", [m.receipt_handle for m in singles])
    finally:
        remove()
    assert [o.status for o in out] == ["acked"] * 10
    assert puts == ["PutObject"]
    assert stream_count(broker, "retry.") == 10
    again = broker.retries.nack("g", [m.receipt_handle for m in singles])  # a resend
    assert [o.status for o in again] == ["expired"] * 10
    assert stream_count(broker, "retry.") == 10
    clock.advance(10)
    got = broker.consume.receive("g", "t", max_messages=32)
    assert sorted(r.message.offset for r in got) == list(range(10))
    assert {r.delivery_attempt for r in got} == {2}
