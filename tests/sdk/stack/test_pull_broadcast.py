"""PullConsumer, BroadcastConsumer, Admin offsets/rewind and the offsets CLI against the local
stack (real HTTP, real SQLite offset stores)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from cirrusmq import (
    BroadcastConsumer,
    ConsumeResult,
    Message,
    MessageModel,
    MessageView,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from cirrusmq.cli import app
from cirrusmq.cli.offsets import parse_reset_target, parse_timestamp
from cirrusmq.transport import Transport
from typer.testing import CliRunner

from .conftest import RequestCounter, unique

WORKER = Path(__file__).with_name("broadcast_worker.py")


def send_all(endpoint, credentials, topic: str, texts: list[str], **fields) -> None:
    with Producer(endpoint, credentials) as producer:
        producer.send_batch([Message(topic, text.encode(), **fields) for text in texts])


def wait_for(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


class Collector:
    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, message: MessageView) -> ConsumeResult:
        with self.lock:
            self.seen[message.text] += 1
        return ConsumeResult.SUCCESS

    def total(self) -> int:
        with self.lock:
            return sum(self.seen.values())


# ---------------------------------------------------------------------------- broadcast
def test_each_broadcast_instance_gets_every_message_once_and_resumes_after_a_restart(
    endpoint, credentials, make_topic, tmp_path
):
    topic, group = make_topic(queues=4), unique("bc")
    store = tmp_path / "offsets.db"

    def instance(name: str, collector: Collector) -> BroadcastConsumer:
        return BroadcastConsumer(
            endpoint,
            credentials,
            group,
            {topic: "*"},
            collector,
            instance_id=name,
            offset_store_path=store,
            max_poll_interval_s=0.2,
        ).start()

    collectors = {name: Collector() for name in ("a", "b", "c")}
    consumers = {name: instance(name, c) for name, c in collectors.items()}
    try:
        check_broadcast(endpoint, credentials, topic, collectors, consumers, instance)
    finally:
        for consumer in consumers.values():
            consumer.shutdown()


def check_broadcast(endpoint, credentials, topic, collectors, consumers, instance) -> None:
    first = [f"m{i}" for i in range(40)]
    send_all(endpoint, credentials, topic, first, keys=["k"])
    for collector in collectors.values():
        wait_for(lambda c=collector: c.total() >= len(first))
    consumers["b"].shutdown()
    second = [f"n{i}" for i in range(20)]
    send_all(endpoint, credentials, topic, second)
    for name in ("a", "c"):
        wait_for(lambda n=name: collectors[n].total() >= len(first) + len(second))
    restarted = Collector()
    consumers["b"] = instance("b", restarted)
    wait_for(lambda: restarted.total() >= len(second))
    time.sleep(0.5)  # nothing more comes
    for name in ("a", "c"):
        assert collectors[name].seen == Counter(first + second)
    assert collectors["b"].seen == Counter(first)
    assert restarted.seen == Counter(second)


def test_broadcast_applies_the_tag_filter_and_counts_listener_failures(
    endpoint, credentials, make_topic, tmp_path
):
    topic = make_topic(queues=2)
    seen: list[str] = []

    def listener(message: MessageView) -> ConsumeResult:
        seen.append(message.text)
        return ConsumeResult.FAILURE if message.text == "bad" else ConsumeResult.SUCCESS

    with PushConsumer(
        endpoint,
        credentials,
        unique("bc"),
        {topic: "A"},
        listener,
        message_model=MessageModel.BROADCASTING,
        instance_id="one",
        offset_store_path=tmp_path / "offsets.db",
        max_poll_interval_s=0.2,
    ) as consumer:
        assert isinstance(consumer, BroadcastConsumer)
        send_all(endpoint, credentials, topic, ["x"], tag="B")
        send_all(endpoint, credentials, topic, ["ok", "bad"], tag="A")
        wait_for(lambda: len(seen) >= 2)
        time.sleep(0.3)
    assert sorted(seen) == ["bad", "ok"]
    assert (consumer.consumed_messages, consumer.failed_messages) == (1, 1)


def test_a_broadcast_instance_killed_mid_batch_loses_nothing_and_repeats_at_most_that_batch(
    endpoint, credentials, make_topic, tmp_path
):
    topic, group = make_topic(queues=2), unique("bc")
    texts = [f"m{i}" for i in range(30)]
    send_all(endpoint, credentials, topic, texts)
    store, log = tmp_path / "offsets.db", tmp_path / "seen.log"
    env = {
        **os.environ,
        "CIRRUSMQ_ACCESS_KEY": credentials.access_key,
        "CIRRUSMQ_SECRET_KEY": credentials.secret_key,
    }
    args = ["--endpoint", endpoint, "--topic", topic, "--group", group]
    args += ["--store", str(store), "--log", str(log)]
    worker = subprocess.Popen([sys.executable, str(WORKER), *args], env=env)
    try:
        wait_for(lambda: log.exists() and len(log.read_text().split()) >= 12)
    finally:
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    before = log.read_text().split()
    collector = Collector()
    with BroadcastConsumer(
        endpoint,
        credentials,
        group,
        [topic],
        collector,
        instance_id="worker",
        offset_store_path=store,
        max_poll_interval_s=0.2,
    ):
        wait_for(lambda: set(before) | set(collector.seen) >= set(texts))
    assert Counter(before)[before[-1]] == 1 and max(Counter(before).values()) == 1
    repeated = set(before) & set(collector.seen)
    assert len(repeated) <= 5  # at most the batch in progress (max_poll_messages=5)
    assert sorted(set(before) | set(collector.seen)) == sorted(texts)


# ---------------------------------------------------------------------------- pull
def test_pull_consumer_seeks_polls_commits_and_resumes_after_a_restart(
    endpoint, credentials, make_topic, tmp_path
):
    topic, group = make_topic(queues=1), unique("pull")
    store = tmp_path / "offsets.db"
    for chunk in ([f"o{i}" for i in range(0, 4)], [f"o{i}" for i in range(4, 10)]):
        send_all(endpoint, credentials, topic, chunk)
        time.sleep(0.01)

    def consumer() -> PullConsumer:
        return PullConsumer(
            endpoint,
            credentials,
            group,
            instance_id="i1",
            offset_store_path=store,
            consume_from="earliest",
            max_poll_messages=4,
        )

    with consumer() as pull:
        pull.assign(topic)
        assert pull.assignment == [0] and pull.position(0) == 0 and pull.committed(0) is None
        texts = [m.text for m in pull.poll(1)]
        assert texts == ["o0", "o1", "o2", "o3"] and pull.position(0) == 4
        pull.seek(0, 7)
        assert [m.text for m in pull.poll(1)] == ["o7", "o8", "o9"]
        pull.seek_to_beginning()
        messages = pull.poll(1)
        assert [m.offset for m in messages] == [0, 1, 2, 3]
        pull.seek_to_timestamp(messages[-1].stored_timestamp + 1)  # the second send on
        second = pull.poll(1)
        assert second[0].stored_timestamp > messages[-1].stored_timestamp
        pull.seek(0, second[0].offset + 1)
        pull.commit()
        committed = pull.position(0)
        pull.seek_to_end()
        assert pull.position(0) == 10 and pull.poll(0.2) == []
        with pytest.raises(ValueError):
            pull.seek(0, -1)
        with pytest.raises(ValueError):
            pull.seek(3, 0)
    with consumer() as again:  # restarted: goes on from the commit, not the seek after it
        again.assign(topic)
        assert again.committed(0) == committed == again.position(0)
        assert [m.offset for m in again.poll(1)][0] == committed


def recreate(stack, admin, topic: str, **options) -> None:
    """Delete ``topic``, let the janitor purge it, and create it again."""
    from cirrusmq_broker.services.janitor import PURGE_DELAY_SECONDS

    admin.delete_topic(topic)
    stack.advance_time(PURGE_DELAY_SECONDS + 1)
    stack.run_schedule("JanitorFunction", "PurgeDeletedTopics")
    admin.create_topic(topic, **options)


def test_a_pull_consumer_reads_a_recreated_topic_from_its_first_message(
    cirrusmq_stack, endpoint, credentials, admin, tmp_path
):
    """Positions committed on a topic that is then deleted and created again never skip
    the new topic's messages."""
    topic, group = unique("recreated"), unique("pull")
    admin.create_topic(topic, queues=1)
    store = tmp_path / "offsets.db"

    def read_all() -> list[str]:
        with PullConsumer(
            endpoint, credentials, group, instance_id="i1", offset_store_path=store,
            consume_from="earliest",
        ) as pull:  # fmt: skip
            pull.assign(topic)
            texts = []
            while messages := pull.poll(0.5):
                texts += [m.text for m in messages]
            pull.commit()
            return texts

    send_all(endpoint, credentials, topic, ["o0", "o1", "o2"])
    assert read_all() == ["o0", "o1", "o2"]
    recreate(cirrusmq_stack, admin, topic, queues=1)
    send_all(endpoint, credentials, topic, [f"n{i}" for i in range(5)])
    assert read_all() == [f"n{i}" for i in range(5)]
    send_all(endpoint, credentials, topic, ["n5"])
    assert read_all() == ["n5"]


def test_pull_consumer_starts_at_the_end_by_default_and_long_polls(
    endpoint, credentials, make_topic, tmp_path
):
    topic = make_topic(queues=1)
    send_all(endpoint, credentials, topic, ["old"])
    with PullConsumer(
        endpoint, credentials, unique("pull"), offset_store_path=tmp_path / "o.db"
    ) as pull:
        pull.assign(topic, [0])
        assert pull.poll(0) == []
        later = threading.Timer(0.5, send_all, (endpoint, credentials, topic, ["new"]))
        later.start()
        got = pull.poll(10)
        later.join()
        assert [m.text for m in got] == ["new"]


def test_an_idle_pull_over_several_queues_costs_one_request_per_interval(
    endpoint, credentials, make_topic, tmp_path
):
    topic = make_topic(queues=8)
    counter = RequestCounter()
    transport = Transport(endpoint, credentials, event_hooks=counter.hooks)
    try:
        with PullConsumer(
            endpoint,
            credentials,
            unique("pull"),
            offset_store_path=tmp_path / "o.db",
            poll_interval_s=0.2,
            transport=transport,
        ) as pull:
            pull.assign(topic)
            counter.counts.clear()
            assert pull.poll(0.5) == []
            reads = sum(n for path, n in counter.counts.items() if "/queues/" in path)
            checks = counter.counts[f"GET /v1/topics/{topic}/offsets"]
            assert reads == 0 and 1 <= checks <= 4
            send_all(endpoint, credentials, topic, ["x"], keys=["k"])
            assert [m.text for m in pull.poll(2)] == ["x"]
    finally:
        transport.close()


# ---------------------------------------------------------------------------- admin, cli
def test_admin_rewinds_a_group_by_timestamp(endpoint, credentials, admin, make_topic):
    topic, group = make_topic(queues=2), unique("g")
    send_all(endpoint, credentials, topic, ["a1", "a2"], keys=["x"])
    time.sleep(0.01)
    send_all(endpoint, credentials, topic, ["b1", "b2", "b3"])
    with SimpleConsumer(endpoint, credentials, group, {topic: "*"}, 1) as consumer:
        got = []
        while len(got) < 5:
            got += consumer.receive(10)
        consumer.ack_batch(got)
        since = min(m.stored_timestamp for m in got if m.text.startswith("b"))
        result = admin.reset_offsets(group, topic, since)
        assert result.to == "timestamp" and not result.truncated
        assert {q.queue for q in result.queues} == {0, 1}
        again = []
        for _ in range(5):
            again += consumer.receive(10)
            if len(again) >= 3:
                break
        assert sorted(m.text for m in again) == ["b1", "b2", "b3"]
    info = admin.topic_offsets(topic, timestamp=since)
    assert sum(q.max_offset - q.timestamp_offset for q in info) == 3


def test_cli_offsets_show_reset_and_read(endpoint, credentials, make_topic, tmp_path, monkeypatch):
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    runner = CliRunner()
    topic, group = make_topic(queues=1), unique("g")
    send_all(endpoint, credentials, topic, ["one", "two", "three"])

    def run(*args: str, code: int = 0) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, result.output
        return result.output

    shown = json.loads(run("offsets", "show", topic, "--json"))
    assert [(q["min_offset"], q["max_offset"]) for q in shown["queues"]] == [(0, 3)]
    assert "two" in run("read", topic, "--queue", "0", "--offset", "1", "--max", "1")
    reset = json.loads(run("offsets", "reset", group, topic, "--to", "0:2", "--yes", "--json"))
    assert reset["queues"][0]["offset"] == 2
    run("offsets", "reset", group, topic, "--to", "0:x", code=2)  # not a target: usage error
    failed = run("offsets", "reset", group, topic, "--to", "0:9", "--yes", code=1)
    assert "InvalidOffset" in failed


def test_cli_target_parsing():
    assert parse_reset_target("earliest") == "earliest"
    assert parse_reset_target("0:12,3:0") == {0: 12, 3: 0}
    assert parse_reset_target("1790000000000") == 1790000000000
    assert parse_reset_target("2026-11-23T03:00:00Z") == parse_timestamp("2026-11-23T03:00:00")
    for bad in ("soon", "0:1,x", "2026-13-45"):
        with pytest.raises(ValueError):
            parse_reset_target(bad)
