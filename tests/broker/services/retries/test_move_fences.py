"""Moves that settle or forward a leased message (expiry, nack) are fenced on the lease they
read: an ack, a change of invisible time or another move landing in between makes the move
read again, so no message is forwarded twice and an ``acked`` answer is never followed by a
redelivery."""

from __future__ import annotations

import threading

import boto3
from broker_helpers import (
    ack_statuses,
    create_fifo_topic,
    send,
    serialised_aws_calls,
    statuses,
    stream_count,
)
from cirrusmq_broker.errors import ReceiptHandleExpired
from cirrusmq_broker.services import retries as retries_module
from cirrusmq_broker.services.moves import MoveAppender
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_broker.storage.groups.move_settles import MoveSettles


def retry_count(broker) -> int:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=broker.settings.log_index_table)["Items"]
    return sum(int(i["count"]["N"]) for i in items if i["stream"]["S"].startswith("retry."))


def dead_letters(broker, group: str) -> list[bytes]:
    return sorted(d.message.body for d in broker.dead_letters.list(group).dead_letters)


def drain(broker, clock, group: str, topic: str) -> list:
    """Everything deliverable now (an idle receive looks at the retry topic again 5 s on)."""
    got: list = []
    while True:
        batch = broker.consume.receive(group, topic, max_messages=100)
        if not batch:
            clock.advance(6)
            batch = broker.consume.receive(group, topic, max_messages=100)
        if not batch:
            return got
        got += batch


def before_first_move(monkeypatch, prefix: str, action) -> list:
    """Run ``action`` once, just before the first move whose stamp starts with ``prefix``
    is appended (after the mover read the lease); returns what it returned."""
    real, seen = MoveAppender.append, []

    def append(self, topic, queue, messages, stamp, *args, **kwargs):
        if stamp.producer_id.startswith(prefix) and not seen:
            seen.append(action())
        return real(self, topic, queue, messages, stamp, *args, **kwargs)

    monkeypatch.setattr(MoveAppender, "append", append)
    return seen


def after_first_move(monkeypatch, prefix: str, action) -> list:
    real, seen = MoveAppender.append, []

    def append(self, topic, queue, messages, stamp, *args, **kwargs):
        out = real(self, topic, queue, messages, stamp, *args, **kwargs)
        if stamp.producer_id.startswith(prefix) and not seen:
            seen.append(action())
        return out

    monkeypatch.setattr(MoveAppender, "append", append)
    return seen


# ---------------------------------------------------------------- dead letters exactly once
def test_a_change_invisible_landing_before_the_expiry_move_dead_letters_each_once(
    broker, clock, monkeypatch
):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_max_delivery_attempts("g", 1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    clock.advance(10)
    changed = before_first_move(
        monkeypatch, "~expire", lambda: broker.consume.change_invisible("g", b.receipt_handle, 60)
    )
    broker.consume.receive("g", "t")
    assert dead_letters(broker, "g") == [b"a"]  # b has its own deadline now
    clock.advance(60)
    broker.consume.receive("g", "t")
    assert dead_letters(broker, "g") == [b"a", b"b"]
    assert changed[0].message.body == b"b"


def test_a_change_invisible_after_the_expiry_move_is_refused(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_max_delivery_attempts("g", 1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    clock.advance(10)

    def change():
        try:
            return broker.consume.change_invisible("g", b.receipt_handle, 60)
        except ReceiptHandleExpired as exc:
            return exc

    changed = after_first_move(monkeypatch, "~expire", change)
    broker.consume.receive("g", "t")
    assert isinstance(changed[0], ReceiptHandleExpired)  # no handle for a dead letter
    clock.advance(60)
    broker.consume.receive("g", "t")
    assert dead_letters(broker, "g") == [b"a", b"b"]


def test_a_slow_nack_overtaken_by_the_expiry_stores_one_dead_letter(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    broker.retries.set_max_delivery_attempts("g", 1)
    send(broker, "t", b"x")
    [x] = broker.consume.receive("g", "t", invisible_seconds=10)

    def deadline_passes_and_a_receive_expires_the_lease():
        clock.advance(10)
        return broker.consume.receive("g", "t")

    before_first_move(monkeypatch, "~nack", deadline_passes_and_a_receive_expires_the_lease)
    out = broker.retries.nack("g", [x.receipt_handle])
    assert [o.status for o in out] == ["expired"]
    assert dead_letters(broker, "g") == [b"x"]


# ---------------------------------------------------------------- acked means never again
def test_an_ack_landing_before_the_expiry_move_keeps_the_message_acked(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    clock.advance(10)
    acked = before_first_move(
        monkeypatch, "~expire", lambda: ack_statuses(broker, "g", [a.receipt_handle])
    )
    broker.consume.receive("g", "t")
    assert acked == [["acked"]]
    clock.advance(10)
    assert [m.message.body for m in drain(broker, clock, "g", "t")] == [b"b"]


def test_a_whole_lease_ack_landing_before_the_expiry_move_moves_nothing(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    got = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    clock.advance(10)
    handles = [m.receipt_handle for m in got]
    acked = before_first_move(monkeypatch, "~expire", lambda: ack_statuses(broker, "g", handles))
    broker.consume.receive("g", "t")
    assert acked == [["acked", "acked"]]
    assert stream_count(broker, "retry.") == 0
    clock.advance(10)
    assert drain(broker, clock, "g", "t") == []


def test_an_ack_after_the_expiry_move_answers_expired(broker, clock, monkeypatch):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b")
    got = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    clock.advance(10)
    handles = [m.receipt_handle for m in got]
    acked = after_first_move(monkeypatch, "~expire", lambda: ack_statuses(broker, "g", handles))
    broker.consume.receive("g", "t")
    assert acked == [["expired", "expired"]]
    clock.advance(10)
    assert sorted(m.message.body for m in drain(broker, clock, "g", "t")) == [b"a", b"b"]


def test_an_old_handle_of_a_message_moved_on_by_its_own_lease_answers_expired(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y")
    x, y = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=100)
    broker.consume.change_invisible("g", x.receipt_handle, 10)  # x: a lease of its own
    clock.advance(10)
    broker.consume.receive("g", "t")  # x's lease expired: x moves to the retry topic
    assert stream_count(broker, "retry.") == 1
    assert ack_statuses(broker, "g", [x.receipt_handle, y.receipt_handle]) == ["expired", "acked"]
    clock.advance(10)
    assert [m.message.body for m in drain(broker, clock, "g", "t")] == [b"x"]


def test_an_old_handle_of_a_message_redelivered_in_place_answers_expired(broker, clock):
    create_fifo_topic(broker, "t")  # an expired lease is redelivered in place
    send(broker, "t", b"x", b"y", message_group="k")
    x, y = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=100)
    assert ack_statuses(broker, "g", [y.receipt_handle]) == ["acked"]  # y is done: only x
    broker.consume.change_invisible("g", x.receipt_handle, 10)  # comes back (FIFO: whole lease)
    clock.advance(10)
    [again] = broker.consume.receive("g", "t")
    assert again.message.body == b"x"
    assert ack_statuses(broker, "g", [x.receipt_handle]) == ["expired"]
    assert ack_statuses(broker, "g", [again.receipt_handle, y.receipt_handle]) == ["acked"] * 2
    [status] = statuses(broker, "g")
    assert (status.committed_offset, status.inflight) == (2, 0)


def test_acks_racing_expiry_moves_of_other_receivers_are_never_followed_by_a_redelivery(
    broker, clock, monkeypatch
):
    serialised_aws_calls(monkeypatch)
    broker.admin.create_topic("t", queues=1)
    leases = 40
    for i in range(leases):
        send(broker, "t", *[b"%d.%d" % (i, j) for j in range(5)])
    taken = [
        broker.consume.receive("g", "t", max_messages=5, invisible_seconds=10)
        for _ in range(leases)
    ]
    assert all(len(lease) == 5 for lease in taken)
    clock.advance(11)  # every lease is past its deadline
    pending, answers, done = list(taken), {}, threading.Event()
    lock, errors = threading.Lock(), []

    def acker():
        try:
            while True:
                with lock:
                    if not pending:
                        return
                    lease = pending.pop()
                outcome = broker.consume.ack("g", [m.receipt_handle for m in lease])
                with lock:
                    for m, o in zip(lease, outcome, strict=True):
                        answers[m.message.body] = o.status.value
        except Exception as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    def receiver():
        try:
            while not done.is_set():
                assert broker.consume.receive("g", "t", max_messages=32) == []
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    receivers = [threading.Thread(target=receiver) for _ in range(2)]
    ackers = [threading.Thread(target=acker) for _ in range(4)]
    for t in receivers + ackers:
        t.start()
    for t in ackers:
        t.join()
    done.set()
    for t in receivers:
        t.join()
    assert errors == []
    clock.advance(11)
    again = [m.message.body for m in drain(broker, clock, "g", "t")]
    clock.advance(11)  # after moving leases nobody moved yet: their messages are due
    again += [m.message.body for m in drain(broker, clock, "g", "t")]
    acked = {body for body, status in answers.items() if status == "acked"}
    assert acked & set(again) == set()  # acked: never delivered again
    assert len(again) == len(set(again))  # moved once
    assert acked | set(again) == {m.message.body for lease in taken for m in lease}
    print(f"\n{len(acked)} acked, {len(again)} expired and delivered again")


def lease_deletes(operation: str, params: dict) -> list[dict]:
    """The deletes of lease items (``...#L...``) one GroupsTable call makes, each with its
    condition (None when it has none)."""

    def is_lease(key: dict) -> bool:
        return "#L" in key["stream"]["S"]

    found = []
    if operation == "DeleteItem" and is_lease(params["Key"]):
        found.append(params.get("ConditionExpression"))
    elif operation == "BatchWriteItem":
        for requests in params["RequestItems"].values():
            found += [
                None
                for r in requests
                if "DeleteRequest" in r and is_lease(r["DeleteRequest"]["Key"])
            ]
    elif operation == "TransactWriteItems":
        for item in params["TransactItems"]:
            if "Delete" in item and is_lease(item["Delete"]["Key"]):
                found.append(item["Delete"].get("ConditionExpression"))
    return found


def test_every_lease_delete_of_acks_nacks_and_moves_is_conditional(broker, clock):
    conditions: list = []
    remove = observe_calls(lambda s, op, p: conditions.extend(lease_deletes(op, p)))
    try:
        broker.admin.create_topic("t", queues=1)
        send(broker, "t", *[b"%d" % i for i in range(8)])
        whole = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
        ack_statuses(broker, "g", [m.receipt_handle for m in whole])  # the whole lease
        part = broker.consume.receive("g", "t", max_messages=3, invisible_seconds=10)
        broker.consume.change_invisible("g", part[0].receipt_handle, 20)  # one moved out
        ack_statuses(broker, "g", [m.receipt_handle for m in part])  # old handles: ADD path
        [n] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=10)
        broker.retries.nack("g", [n.receipt_handle])
        broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
        clock.advance(10)
        broker.consume.receive("g", "t")  # the expiry moves the last lease on
        clock.advance(20)
        drain(broker, clock, "g", "t")
    finally:
        remove()
    assert conditions  # the scenario deleted leases
    assert None not in conditions


def test_parent_handle_ack_after_nack_of_the_split_off_message_is_not_acked(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y")
    x, y = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=100)
    changed = broker.consume.change_invisible("g", x.receipt_handle, 60)  # x: a lease of its own
    out = broker.retries.nack("g", [changed.receipt_handle])
    assert [o.status for o in out] == ["acked"]  # given back: x goes to the retry topic
    assert retry_count(broker) == 1
    answer = ack_statuses(broker, "g", [x.receipt_handle, y.receipt_handle])
    clock.advance(200)
    again = [m.message.body for m in drain(broker, clock, "g", "t")]
    assert again == [b"x"]  # x comes back from the retry topic...
    assert answer == ["expired", "acked"]  # ...so its old handle's ack must not say acked


def test_a_late_removal_of_a_settled_lease_spares_a_new_lease_at_its_slot(
    broker, clock, monkeypatch
):
    from cirrusmq_broker.storage.groups.leases import LeaseItems

    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"a", b"b", b"c")
    a, b = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=10)
    real_delete_if, lost = LeaseItems._delete_if, [True]

    def delete_if(self, *args, **kwargs):
        if lost:  # the ack's delete of the lease it settled does not happen (a crash)
            lost.pop()
            return False
        return real_delete_if(self, *args, **kwargs)

    monkeypatch.setattr(LeaseItems, "_delete_if", delete_if)
    assert ack_statuses(broker, "g", [a.receipt_handle]) == ["acked"]
    assert ack_statuses(broker, "g", [b.receipt_handle]) == ["acked"]  # settled, v3, kept
    clock.advance(10)  # its deadline passed: the next receive reads it and removes it

    real_cleanup, meanwhile = LeaseItems.delete_settled, [True]

    def cleanup(self, leases):
        if meanwhile:  # this container pauses; an admin resets, another consumer works
            meanwhile.pop()
            broker.offset_reset.reset("g", "t", "earliest")
            got = broker.consume.receive("g", "t", max_messages=3, invisible_seconds=10)
            assert [m.message.offset for m in got] == [0, 1, 2]  # a new lease at slot 0
            assert ack_statuses(broker, "g", [got[0].receipt_handle]) == ["acked"]
            assert ack_statuses(broker, "g", [got[1].receipt_handle]) == ["acked"]  # v3
        return real_cleanup(self, leases)

    monkeypatch.setattr(LeaseItems, "delete_settled", cleanup)
    [c] = broker.consume.receive("g", "t", max_messages=3, invisible_seconds=10)
    assert c.message.body == b"c"
    assert not meanwhile
    clock.advance(10)  # the new lease's c is unacked: it must come back
    broker.consume.receive("g", "t")  # its expiry moves it to the retry topic
    clock.advance(10)
    assert [m.message.body for m in drain(broker, clock, "g", "t")] == [b"c"]


def test_an_ack_of_a_handle_nacked_before_answers_expired(broker, clock):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x")
    [x] = broker.consume.receive("g", "t", max_messages=1, invisible_seconds=100)
    out = broker.retries.nack("g", [x.receipt_handle])
    assert [o.status for o in out] == ["acked"]  # given back: its lease is gone
    answer = ack_statuses(broker, "g", [x.receipt_handle])
    clock.advance(200)
    assert [m.message.body for m in drain(broker, clock, "g", "t")] == [b"x"]
    assert answer == ["expired"]  # it comes back: the ack is stale, not acked


def test_an_ack_of_a_nacked_handle_after_the_rest_of_its_lease_was_acked_answers_expired(
    broker, clock
):
    broker.admin.create_topic("t", queues=1)
    send(broker, "t", b"x", b"y")
    x, y = broker.consume.receive("g", "t", max_messages=2, invisible_seconds=100)
    assert [o.status for o in broker.retries.nack("g", [x.receipt_handle])] == ["acked"]
    assert ack_statuses(broker, "g", [y.receipt_handle]) == ["acked"]  # the lease is deleted
    answer = ack_statuses(broker, "g", [x.receipt_handle])
    clock.advance(200)
    assert [m.message.body for m in drain(broker, clock, "g", "t")] == [b"x"]
    assert answer == ["expired"]


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
