"""A local stack on a data dir keeps its topics, messages, groups, offsets and keys across
restarts: a clean stop, and ``kill -9`` of ``cirrusmq dev`` and its moto child in the middle
of sends and acks (every send answered is there once, every answered ack stays acked)."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cirrusmq import Admin, Credentials, Message, Permissions, Producer, SimpleConsumer
from cirrusmq.testing import LocalStack

CREDENTIALS = Credentials("persist-admin", "persist-secret-0123456789")

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the moto child"
)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@contextmanager
def running_dev(env: dict[str, str], *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``cirrusmq dev`` as a process; yields it and its HTTP API's URL (from the banner)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cirrusmq.cli", "dev", "--port", "0", "--no-schedules", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines, endpoint = [], None
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if match := re.match(r"\s+HTTP API\s+(\S+)", line):
                endpoint = match[1]
            if line.startswith("Press Ctrl-C"):
                break
        assert endpoint is not None, "".join(lines)
        yield process, endpoint
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def test_topics_groups_keys_and_messages_survive_a_clean_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with LocalStack(schedules=False, data_dir=data, credentials=CREDENTIALS) as stack:
        with Admin(stack.endpoint, CREDENTIALS) as admin:
            admin.create_topic("kept", queues=2)
            key = admin.create_access_key(Permissions(admin=True), "a user's key")
        with Producer(stack.endpoint, CREDENTIALS) as producer:
            producer.send_batch([Message("kept", f"m{i}") for i in range(6)])
        with SimpleConsumer(stack.endpoint, CREDENTIALS, "g", ["kept"]) as consumer:
            first = consumer.receive(3, 30)
            consumer.ack_batch(first)
        stack.advance_time(5)
        offset = stack.spark_options()["clockOffsetMs"]
    with LocalStack(schedules=False, data_dir=data, credentials=CREDENTIALS) as stack:
        assert stack.spark_options()["clockOffsetMs"] == offset
        with Admin(stack.endpoint, CREDENTIALS) as admin:
            assert "kept" in [topic.name for topic in admin.list_topics()]
            assert key.access_key in [k.access_key for k in admin.list_access_keys()]
        user = Credentials(key.access_key, key.secret_key)
        with SimpleConsumer(stack.endpoint, user, "g", ["kept"]) as consumer:
            rest = consumer.receive(10, 30)
        assert sorted(m.text for m in first + rest) == [f"m{i}" for i in range(6)]
        assert not {m.text for m in first} & {m.text for m in rest}


class _Load:
    """Sends (one message a request) and receive + ack rounds on a thread, noting what was
    answered: ``sent`` bodies, ``acked`` bodies, ``operations`` done."""

    def __init__(self, endpoint: str, topic: str, group: str) -> None:
        self.endpoint, self.topic, self.group = endpoint, topic, group
        self.sent: list[str] = []
        self.acked: set[str] = set()
        self.operations = 0
        self.failed = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, prefix: str) -> None:
        self.prefix = prefix
        self._thread.start()

    def _run(self) -> None:
        try:
            with (
                Producer(self.endpoint, CREDENTIALS, max_attempts=1, linger_ms=0) as producer,
                SimpleConsumer(
                    self.endpoint, CREDENTIALS, self.group, [self.topic], max_attempts=1
                ) as consumer,
            ):
                for i in range(100_000):
                    body = f"{self.prefix}-{i}"
                    producer.send(Message(self.topic, body))
                    self.sent.append(body)
                    if i % 3 == 2:
                        got = consumer.receive(8, 10)
                        for message, result in zip(got, consumer.ack_batch(got), strict=True):
                            if result.acked:
                                self.acked.add(message.text)
                    self.operations += 1
        except Exception:  # noqa: BLE001 - the stack was killed: the load ends here
            self.failed.set()

    def join(self) -> None:
        self._thread.join(60)


def _kill_9(process: subprocess.Popen[str]) -> None:
    """``kill -9`` the moto child, then ``cirrusmq dev`` itself."""
    for child in _children(process.pid):
        os.kill(child, signal.SIGKILL)
    process.send_signal(signal.SIGKILL)
    process.wait(10)


@pytest.mark.slow
def test_kill_9_in_the_middle_of_sends_and_acks_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIRRUSMQ_")}
    env.update(
        CIRRUSMQ_CONFIG=str(tmp_path / "config"),
        CIRRUSMQ_ACCESS_KEY=CREDENTIALS.access_key,
        CIRRUSMQ_SECRET_KEY=CREDENTIALS.secret_key,
        PYTHONUNBUFFERED="1",
    )
    data = str(tmp_path / "data")
    rng = random.Random(32)
    sent: list[str] = []
    acked: set[str] = set()
    killed_at = 0.0
    for round_ in range(3):
        with running_dev(env, "--data-dir", data) as (process, endpoint):
            if round_ == 0:
                with Admin(endpoint, CREDENTIALS) as admin:
                    admin.create_topic("load", queues=4)
            load = _Load(endpoint, "load", "g")
            load.start(f"r{round_}")
            moment = rng.randint(5, 40)  # operations before the kill
            while load.operations < moment and not load.failed.is_set():
                time.sleep(0.05)
            _kill_9(process)
            killed_at = time.monotonic()
            load.join()
            sent += load.sent
            acked |= load.acked
    assert acked and len(sent) > len(acked)
    with running_dev(env, "--data-dir", data) as (_, endpoint):
        stored: Counter[str] = Counter()
        with SimpleConsumer(endpoint, CREDENTIALS, "fresh", ["load"], await_duration=0) as fresh:
            empty = 0
            while empty < 5 and not set(sent) <= set(stored):  # a receive may miss a queue
                got = fresh.receive(100, 60)
                stored.update(m.text for m in got)
                empty = 0 if got else empty + 1
            stored.update(m.text for m in fresh.receive(100, 60))
        assert set(sent) <= set(stored), "an answered send is gone"
        assert max(stored.values()) == 1, "a message is stored twice"
        # the acking group: everything not acked comes (back) once its lease and backoff
        # passed; nothing acked ever does
        redelivered: set[str] = set()
        with SimpleConsumer(endpoint, CREDENTIALS, "g", ["load"], await_duration=0) as group:
            while not (set(sent) <= acked | redelivered) or time.monotonic() < killed_at + 25:
                got = group.receive(100, 60)
                redelivered |= {m.text for m in got}
                assert not redelivered & acked, "an acked message came back"
                if not got:
                    assert time.monotonic() < killed_at + 600, "unacked messages never came back"
                    time.sleep(1)
