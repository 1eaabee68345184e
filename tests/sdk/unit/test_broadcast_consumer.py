"""BroadcastConsumer against fake reads by offset (no service): its loop outlives a locked
offset store; PushConsumer in broadcasting mode takes the push options."""

from __future__ import annotations

import sqlite3
import threading

from cirrusmq.consumer.broadcast import BroadcastConsumer, MessageModel
from cirrusmq.consumer.offset_store import OffsetStore
from cirrusmq.consumer.push import PushConsumer
from cirrusmq.message import ConsumeResult

from .fake_log import OneQueue


def test_a_locked_offset_store_does_not_kill_the_broadcast_loop(tmp_path, monkeypatch):
    calls = {"n": 0}
    real_save = OffsetStore.save

    def flaky_save(self, *a, **k):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls["n"] += 1
        if calls["n"] in (2, 3):
            raise sqlite3.OperationalError("database is locked")
        return real_save(self, *a, **k)

    monkeypatch.setattr(OffsetStore, "save", flaky_save)
    got: list[int] = []
    done = threading.Event()

    def listener(message):  # noqa: ANN001, ANN202
        got.append(message.offset)
        if len(got) == 100:
            done.set()
        return ConsumeResult.SUCCESS

    consumer = BroadcastConsumer(
        "http://unused", None, "g", ["t"], listener,
        offset_store_path=tmp_path / "o.db", consume_from="earliest", transport=OneQueue(),
    )  # fmt: skip
    consumer.start()
    assert done.wait(30)
    assert consumer.alive
    assert isinstance(consumer.last_error, sqlite3.OperationalError) and consumer.errors == 2
    assert got == list(range(100))  # nothing skipped, nothing repeated
    consumer.shutdown(5)
    assert not consumer.alive


def test_push_consumer_options_are_accepted_in_broadcasting(tmp_path):
    for n, extra in enumerate(
        (
            {"orderly": True},
            {"client_id": "c1"},
            {"heartbeat_interval_s": 10.0, "heartbeat_timeout_s": 60, "suspend_s": 2.0},
        )
    ):
        consumer = PushConsumer(
            "http://x", None, "g", ["t"], lambda m: ConsumeResult.SUCCESS,
            message_model=MessageModel.BROADCASTING, offset_store_path=tmp_path / f"{n}.db",
            transport=OneQueue(), **extra,
        )  # fmt: skip
        assert isinstance(consumer, BroadcastConsumer)
        if "client_id" in extra:
            assert consumer.instance_id == "c1"
        consumer.shutdown()
