"""The outbox contract, on both implementations, and what only SQLite does; the consumer's
pending acks (kept in a file of the same kind)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cirrusmq import OutboxLockedError
from cirrusmq.consumer.pending_acks import MemoryPendingAcks, SqlitePendingAcks
from cirrusmq.outbox import MemoryOutbox, OutboxBatch, Refusal, SqliteOutbox
from cirrusmq.producer.accumulator import OpenBatch, PendingMessage, encode_request
from cirrusmq.producer.send_state import merged_payload, messages_json


def batch(topic: str, sequence: int, *ids: str) -> OutboxBatch:
    return OutboxBatch(topic, "p-1", sequence, ids or (f"m{sequence}",), f"{{{sequence}}}".encode())


@pytest.fixture(params=["memory", "sqlite"])
def outbox(request, tmp_path):
    store = MemoryOutbox() if request.param == "memory" else SqliteOutbox(tmp_path / "o.db")
    yield store
    store.close()


@pytest.fixture(params=["memory", "sqlite"])
def acks(request, tmp_path):
    store = (
        MemoryPendingAcks() if request.param == "memory" else SqlitePendingAcks(tmp_path / "a.db")
    )
    yield store
    store.close()


def test_heads_are_claimed_one_per_topic_in_order(outbox):
    a0, a1 = outbox.append(batch("a", 0)), outbox.append(batch("a", 1))
    b0 = outbox.append(batch("b", 2))
    heads = outbox.claim_heads()
    assert [h.entry_id for h in heads] == [a0.entry_id, b0.entry_id]
    assert all(h.attempts == 1 for h in heads)
    assert outbox.claim_heads() == []  # the heads are claimed: nothing else may go
    outbox.remove(a0.entry_id)
    (head,) = outbox.claim_heads()
    assert head.entry_id == a1.entry_id and head.batch == batch("a", 1)


def test_a_released_head_stays_first_and_skipped_topics_wait(outbox):
    a0 = outbox.append(batch("a", 0))
    outbox.append(batch("a", 1))
    outbox.claim_heads()
    outbox.release(a0.entry_id)
    assert outbox.claim_heads(skip_topics={"a"}) == []
    (again,) = outbox.claim_heads()
    assert again.entry_id == a0.entry_id and again.attempts == 2


def test_stats_and_entries(outbox):
    outbox.append(batch("a", 0, "x", "y"))
    outbox.append(batch("b", 1))
    stats = outbox.stats()
    assert (stats.batches, stats.messages) == (2, 3)
    assert stats.bytes == len(b"{0}") + len(b"{1}")
    assert [e.batch.sequence for e in outbox.entries()] == [0, 1]
    assert outbox.topic_counts() == {"a": (1, 2, 3), "b": (1, 1, 3)}


def test_pending_acks_are_counted(acks):
    acks.add("g", [("h1", 10**13)])
    assert acks.count() == 1


def test_acks_expire_and_are_claimed_once(acks):
    acks.add("g", [("old", 1_000), ("new", 5_000)])
    acks.add("g", [("new", 5_000)])  # kept once
    (ack,) = acks.claim(now_ms=2_000)
    assert (ack.group, ack.receipt_handle) == ("g", "new")
    assert acks.claim(now_ms=2_000) == []
    acks.release([ack.ack_id])
    assert [a.receipt_handle for a in acks.claim(now_ms=2_000)] == ["new"]
    acks.remove([ack.ack_id])
    assert acks.count() == 0


def test_sqlite_survives_reopening_and_forgets_old_claims(tmp_path):
    path = tmp_path / "outbox.db"
    store = SqliteOutbox(path)
    first = store.append(batch("a", 7, "m1", "m2"))
    store.claim_heads()  # claimed by a process that then dies...
    store.close()
    reopened = SqliteOutbox(path)
    (head,) = reopened.claim_heads()  # ...so the claim is void for the next owner
    assert head.entry_id == first.entry_id
    assert head.batch == batch("a", 7, "m1", "m2")
    reopened.close()


def test_sqlite_has_one_owner_at_a_time(tmp_path):
    path = tmp_path / "outbox.db"
    owner = SqliteOutbox(path)
    with pytest.raises(OutboxLockedError):
        SqliteOutbox(path)
    owner.close()
    SqliteOutbox(path).close()


def test_sqlite_uses_wal(tmp_path):
    store = SqliteOutbox(tmp_path / "o.db")
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_followers_are_the_never_claimed_batches_behind_a_head(outbox):
    a0 = outbox.append(batch("a", 0))
    outbox.append(batch("b", 1))
    a2, a3, a4 = (outbox.append(batch("a", i)) for i in (2, 3, 4))
    (head, _) = outbox.claim_heads()
    assert head.entry_id == a0.entry_id
    assert [f.entry_id for f in outbox.followers(head, limit=10)] == [
        a2.entry_id,
        a3.entry_id,
        a4.entry_id,
    ]
    assert [f.entry_id for f in outbox.followers(head, limit=2)] == [a2.entry_id, a3.entry_id]
    outbox.remove(a0.entry_id)
    (again,) = outbox.claim_heads(skip_topics={"b"})  # a2 is claimed now: it may be sent
    outbox.release(again.entry_id)
    assert outbox.followers(head, limit=10) == []  # ...so nothing behind a0 is merged past it


def test_merge_replaces_the_head_in_place_and_drops_the_absorbed(outbox):
    a0 = outbox.append(batch("a", 0))
    a1, a2 = outbox.append(batch("a", 1)), outbox.append(batch("a", 2))
    outbox.append(batch("b", 3))
    (head, _) = outbox.claim_heads()
    merged_batch = OutboxBatch("a", "p-2", 9, ("m0", "m1", "m2"), b"{merged}")
    merged = outbox.merge(head, merged_batch, [a1.entry_id, a2.entry_id])
    assert (merged.entry_id, merged.batch, merged.attempts) == (a0.entry_id, merged_batch, 1)
    assert [e.batch.sequence for e in outbox.entries()] == [9, 3]
    assert outbox.claim_heads() == []  # still claimed
    outbox.release(a0.entry_id)
    (again,) = outbox.claim_heads(skip_topics={"b"})
    assert again.batch == merged_batch and again.attempts == 2
    assert outbox.topic_counts()["a"] == (1, 3, len(b"{merged}"))


def test_merged_requests_are_what_encode_request_would_make():
    messages = [{"message_id": f"m{i}", "body": "eA==", "tag": 'a",b'} for i in range(5)]
    first = OpenBatch("t", 0.0, [PendingMessage(m["message_id"], m, 0) for m in messages[:2]])
    second = OpenBatch("t", 0.0, [PendingMessage(m["message_id"], m, 0) for m in messages[2:]])
    parts = [
        messages_json(encode_request("p-1", 0, first)),
        messages_json(encode_request("p-1", 1, second)),
    ]
    merged = merged_payload("p-9", 7, parts)
    whole = OpenBatch("t", 0.0, first.messages + second.messages)
    assert merged == encode_request("p-9", 7, whole)
    other_layout = json.dumps(
        {"messages": messages[:2], "sequence": 1, "producer_id": "x"}
    ).encode()
    assert (
        json.loads(merged_payload("p", 1, [messages_json(other_layout)]))["messages"]
        == messages[:2]
    )


# ---------------------------------------------------------------------------- refusals
REFUSAL = Refusal("TopicNotFound", "no topic a", 404, 1_700_000_000_000)


def test_a_refused_batch_is_set_aside_not_sent_and_not_counted(outbox):
    a0 = outbox.append(batch("a", 0, "x", "y"))
    a1 = outbox.append(batch("a", 1))
    (head,) = outbox.claim_heads()
    outbox.refuse(head.entry_id, REFUSAL)
    (refused,) = outbox.refused()
    assert (refused.entry_id, refused.batch, refused.refusal) == (a0.entry_id, a0.batch, REFUSAL)
    assert refused.topic == "a" and refused.message_ids == ("x", "y")
    assert [e.entry_id for e in outbox.entries()] == [a1.entry_id]
    assert outbox.topic_counts() == {"a": (1, 1, 3)}
    stats = outbox.stats()
    assert (stats.batches, stats.messages, stats.refused_batches, stats.refused_messages) == (
        1,
        1,
        1,
        2,
    )
    (next_head,) = outbox.claim_heads()  # the topic goes on without it
    assert next_head.entry_id == a1.entry_id
    assert outbox.followers(next_head, limit=10) == []


def test_retried_batches_go_back_to_their_place_unchanged(outbox):
    a0, a1 = outbox.append(batch("a", 0)), outbox.append(batch("a", 1))
    outbox.refuse(outbox.claim_heads()[0].entry_id, REFUSAL)
    outbox.refuse(outbox.claim_heads()[0].entry_id, REFUSAL)
    a2 = outbox.append(batch("a", 2))
    assert [r.entry_id for r in outbox.retry_refused([a1.entry_id])] == [a1.entry_id]
    assert [r.entry_id for r in outbox.refused()] == [a0.entry_id]
    assert [r.entry_id for r in outbox.retry_refused()] == [a0.entry_id]
    assert outbox.refused() == []
    assert [e.entry_id for e in outbox.entries()] == [a0.entry_id, a1.entry_id, a2.entry_id]
    (head,) = outbox.claim_heads()
    assert head.batch == batch("a", 0)  # same producer id and sequence: idempotent resend


def test_refused_batches_can_be_purged(outbox):
    a0, a1 = outbox.append(batch("a", 0)), outbox.append(batch("b", 1))
    for head in outbox.claim_heads():
        outbox.refuse(head.entry_id, REFUSAL)
    assert [r.entry_id for r in outbox.purge_refused([a1.entry_id])] == [a1.entry_id]
    assert [r.entry_id for r in outbox.purge_refused()] == [a0.entry_id]
    assert outbox.refused() == [] and outbox.stats().refused_batches == 0
    assert outbox.entries() == [] and outbox.claim_heads() == []


def test_refusals_survive_reopening(tmp_path):
    path = tmp_path / "o.db"
    store = SqliteOutbox(path)
    store.append(batch("a", 0))
    store.refuse(store.claim_heads()[0].entry_id, REFUSAL)
    store.close()
    reopened = SqliteOutbox(path)
    assert [r.refusal for r in reopened.refused()] == [REFUSAL]
    assert reopened.claim_heads() == []
    reopened.close()


V1_SCHEMA = """
CREATE TABLE batches (
    entry_id INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT NOT NULL, producer_id TEXT NOT NULL,
    sequence INTEGER NOT NULL, message_ids TEXT NOT NULL, message_count INTEGER NOT NULL,
    payload BLOB NOT NULL, size INTEGER NOT NULL, created_ms INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, claimed INTEGER NOT NULL DEFAULT 0,
    UNIQUE (producer_id, sequence));
CREATE TABLE acks (
    ack_id INTEGER PRIMARY KEY AUTOINCREMENT, group_name TEXT NOT NULL,
    receipt_handle TEXT NOT NULL, expires_ms INTEGER NOT NULL,
    claimed INTEGER NOT NULL DEFAULT 0, UNIQUE (group_name, receipt_handle));
INSERT INTO batches (topic, producer_id, sequence, message_ids, message_count, payload, size,
    created_ms) VALUES ('a', 'p-old', 3, '["m1"]', 1, X'7b7d', 2, 0);
PRAGMA user_version = 1;
"""


def test_a_version_1_outbox_is_migrated(tmp_path):
    path = tmp_path / "v1.db"
    db = sqlite3.connect(path)
    db.executescript(V1_SCHEMA)
    db.close()
    store = SqliteOutbox(path)
    (head,) = store.claim_heads()
    assert (head.batch.producer_id, head.batch.sequence, head.batch.message_ids) == (
        "p-old",
        3,
        ("m1",),
    )
    store.refuse(head.entry_id, REFUSAL)
    assert store.refused()[0].refusal == REFUSAL
    store.close()


def test_pending_acks_have_one_owner_per_file(tmp_path):
    first = SqlitePendingAcks(tmp_path / "acks.db")
    try:
        with pytest.raises(OutboxLockedError):
            SqlitePendingAcks(tmp_path / "acks.db")
    finally:
        first.close()
    SqlitePendingAcks(tmp_path / "acks.db").close()  # free again once closed


def test_pending_acks_in_an_outbox_file_of_an_earlier_sdk_are_retried(tmp_path):
    """Consumers kept their pending acks in an outbox file (batches and acks tables): the
    pending-acks store reads the same acks table."""
    path = tmp_path / "consumer.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE batches (entry_id INTEGER PRIMARY KEY AUTOINCREMENT, topic TEXT);"
        "CREATE TABLE acks (ack_id INTEGER PRIMARY KEY AUTOINCREMENT, group_name TEXT NOT NULL,"
        " receipt_handle TEXT NOT NULL, expires_ms INTEGER NOT NULL,"
        " claimed INTEGER NOT NULL DEFAULT 0, UNIQUE (group_name, receipt_handle));"
        "INSERT INTO acks (group_name, receipt_handle, expires_ms, claimed)"
        " VALUES ('g', 'h1', 5000, 1);"
        "PRAGMA user_version = 2;"
    )
    db.close()
    store = SqlitePendingAcks(path)
    try:
        assert store.count() == 1
        (ack,) = store.claim(now_ms=1_000)  # the earlier owner's claim is void
        assert (ack.group, ack.receipt_handle, ack.expires_ms) == ("g", "h1", 5000)
    finally:
        store.close()
