"""The offline outbox end to end: a producer process sends while the service is unreachable,
is killed with SIGKILL, and a new process on the same outbox delivers everything once, in
order per message group, when the service is back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path

from cirrusmq import Credentials
from cirrusmq.outbox import SqliteOutbox

from ..helpers import drain

WORKER = Path(__file__).with_name("outbox_worker.py")


def run_worker(credentials: Credentials, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "CIRRUSMQ_ACCESS_KEY": credentials.access_key,
        "CIRRUSMQ_SECRET_KEY": credentials.secret_key,
    }
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def read_line(process: subprocess.Popen[str], timeout_s: float) -> str:
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout_s)
    if not lines or not lines[0]:
        process.kill()
        raise AssertionError(f"worker said nothing; stderr: {process.stderr.read()[-3000:]}")
    return lines[0]


def test_outbox_survives_sigkill_and_delivers_exactly_once_in_order(
    endpoint, credentials, admin, topic, group, proxy, tmp_path
):
    outbox = tmp_path / "producer-outbox.db"
    common = ["--endpoint", proxy.url, "--outbox", str(outbox), "--topic", topic]
    proxy.down()  # the service is unreachable: connections are refused

    offline = run_worker(credentials, *common, "--mode", "offline", "--count", "1000")
    parked = read_line(offline, timeout_s=60)
    assert parked.startswith("PARKED"), parked
    os.kill(offline.pid, signal.SIGKILL)
    assert offline.wait(10) == -signal.SIGKILL

    store = SqliteOutbox(outbox)  # the dead process's lock is gone with it
    entries = store.entries()
    assert store.stats().messages == 1000
    assert {e.batch.producer_id for e in entries} == {parked.split()[1]}
    store.close()
    assert admin.describe_topic(topic).message_count == 0

    proxy.up()
    resumed = run_worker(
        credentials, *common, "--mode", "resume", "--start", "1000", "--count", "100"
    )
    assert read_line(resumed, timeout_s=90).startswith("DONE")
    assert resumed.wait(10) == 0

    assert admin.describe_topic(topic).message_count == 1100  # each message stored once
    received = drain(endpoint, credentials, group, topic, expected=1100)
    seqs = [json.loads(m.body)["seq"] for m in received]
    assert sorted(seqs) == list(range(1100))
    by_group = defaultdict(list)
    for m in sorted(received, key=lambda m: (m.queue, m.offset)):
        body = json.loads(m.body)
        assert body["group"] == m.message_group
        by_group[m.message_group].append(body["seq"])
    for group_seqs in by_group.values():
        assert group_seqs == sorted(group_seqs)  # in order, across the kill and the restart
    store = SqliteOutbox(outbox)
    assert store.stats().messages == 0
    store.close()
