"""Regressions from the review of the pull and broadcast consumers (fake transports: the
bugs were in the SDK's own loop and position rules)."""

from __future__ import annotations

import base64
import sqlite3
import threading

import pytest
from cirrusmq.broadcast_consumer import BroadcastConsumer, MessageModel
from cirrusmq.errors import MQError
from cirrusmq.message import ConsumeResult
from cirrusmq.offset_store import OffsetStore
from cirrusmq.pull_consumer import PullConsumer
from cirrusmq.push_consumer import PushConsumer


def _message(queue: int, offset: int) -> dict:
    return {
        "message_id": f"m{queue}-{offset}",
        "topic": "t",
        "body": base64.b64encode(b"x").decode(),
        "tag": None,
        "keys": [],
        "properties": {},
        "queue": queue,
        "offset": offset,
        "born_timestamp": 1,
        "stored_timestamp": 1,
    }


class StaleEnds:
    """Two queues of 10 messages; the second ends check is stale (3) for queue 0. With
    ``head`` set, the queues really end there (the topic was made again)."""

    request_timeout_s = 1.0

    def __init__(self, head: int = 10) -> None:
        self.ends_checks = 0
        self.head = head

    def request(self, method, path, params=None, json_body=None, timeout_s=None):  # noqa: ANN001, ANN201
        if path.endswith("/offsets"):
            if params and params.get("include_min") == "false":
                self.ends_checks += 1
                stale = self.ends_checks == 2
                q0 = 3 if stale else self.head
                return {
                    "topic": "t",
                    "queues": [
                        {"queue": 0, "min_offset": None, "max_offset": q0},
                        {"queue": 1, "min_offset": None, "max_offset": self.head},
                    ],
                }
            return {
                "topic": "t",
                "queues": [{"queue": q, "min_offset": 0, "max_offset": self.head} for q in (0, 1)],
            }
        q = int(path.split("/queues/")[1].split("/")[0])
        offset = int(params["offset"])
        if offset > self.head:  # the read checks the consistent head
            raise MQError(
                "beyond the end",
                code="InvalidOffset",
                http_status=400,
                details={"max_offset": self.head},
            )
        n = min(5, self.head - offset)
        return {
            "start_offset": offset,
            "next_offset": offset + n,
            "truncated": False,
            "max_offset": self.head,
            "messages": [_message(q, o) for o in range(offset, offset + n)],
        }

    def close(self) -> None:
        pass


def test_a_stale_queue_end_never_moves_a_position_back(tmp_path):
    consumer = PullConsumer(
        "http://x",
        None,
        "g",
        consume_from="earliest",
        max_poll_messages=5,
        offset_store_path=tmp_path / "o.db",
        transport=StaleEnds(),
    )
    consumer.assign("t")
    seen = []
    for _ in range(8):
        seen += [(m.queue, m.offset) for m in consumer.poll(0)]
    assert sorted(seen) == [(q, o) for q in (0, 1) for o in range(10)]  # each exactly once
    consumer.close()


def test_a_queue_that_really_ends_lower_goes_on_from_its_end(tmp_path):
    """A recreated topic: the read (consistent head) says InvalidOffset with the end."""
    store = tmp_path / "o.db"
    transport = StaleEnds(head=10)
    first = PullConsumer(
        "http://x", None, "g", consume_from="earliest", offset_store_path=store,
        transport=transport, instance_id="i1",
    )  # fmt: skip
    first.assign("t")
    while first.poll(0):
        pass
    first.commit()
    first.close()
    transport = StaleEnds(head=2)  # made again: 2 messages per queue
    transport.ends_checks = 5  # no stale answer in this part
    again = PullConsumer(
        "http://x", None, "g", consume_from="earliest", offset_store_path=store,
        transport=transport, instance_id="i1",
    )  # fmt: skip
    again.assign("t")
    for _ in range(3):
        again.poll(0)
    assert (again.position(0), again.position(1)) == (2, 2)
    again.close()


class OneQueue:
    request_timeout_s = 1.0

    def request(self, method, path, params=None, json_body=None, timeout_s=None):  # noqa: ANN001, ANN201
        if path.endswith("/offsets"):
            return {"topic": "t", "queues": [{"queue": 0, "min_offset": 0, "max_offset": 100}]}
        offset = int(params["offset"])
        return {
            "start_offset": offset,
            "next_offset": offset + 1,
            "truncated": False,
            "max_offset": 100,
            "messages": [_message(0, offset)] if offset < 100 else [],
        }

    def close(self) -> None:
        pass


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


def test_a_second_live_owner_of_the_same_offsets_is_refused(tmp_path):
    """Two consumers (e.g. two processes on one host, default instance id = host name)
    sharing group, instance id and store would overwrite each other's offsets."""
    from cirrusmq.offset_owner import OffsetOwnerInUseError

    def consumer() -> PullConsumer:
        return PullConsumer(
            "http://x", None, "g", offset_store_path=tmp_path / "o.db", transport=OneQueue()
        )

    first = consumer()
    first.assign("t")
    second = consumer()
    with pytest.raises(OffsetOwnerInUseError):
        second.assign("t")
    first.close()  # the claim goes with its owner
    second.assign("t")
    second.close()
