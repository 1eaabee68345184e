"""``cirrusmq dev`` as a process: it writes the ``local`` profile the CLI then uses, and its
moto child dies with it, ``kill -9`` included (no orphan, no port held)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc to find the moto child"
)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has released its memory and its sockets


def _port_open(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, int(port))) == 0


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cirrusmq.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIRRUSMQ_")}
    env["CIRRUSMQ_CONFIG"] = str(tmp_path / "config")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start_dev(env: dict[str, str], *extra: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Start ``cirrusmq dev`` and read its banner (the HTTP API and moto endpoints, and its
    whole text under ``text``)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "cirrusmq.cli", "dev", "--port", "0", "--no-schedules", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    banner: dict[str, str] = {}
    lines = []
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    for line in process.stdout:
        lines.append(line)
        if match := re.match(r"\s+(HTTP API|AWS \(moto\))\s+(\S+)", line):
            banner[match[1]] = match[2]
        if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
            break
    banner["text"] = "".join(lines)
    return process, banner


@contextmanager
def running_dev(
    env: dict[str, str], *extra: str
) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    process, banner = _start_dev(env, *extra)
    try:
        assert "HTTP API" in banner, banner["text"]
        yield process, banner
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


@pytest.fixture
def dev(env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], dict[str, str]]]:
    with running_dev(env) as started:
        yield started


def test_template_parameters_deploy_the_batch_objects_to_a_directory_bucket(env) -> None:
    express = ("--parameter", "BatchStorage=express", "--parameter", "ExpressZoneId=use1-az4")
    with running_dev(env, *express) as (_process, banner):
        assert "BatchDirectoryBucket" in banner["text"]
        profile = tomllib.loads(Path(env["CIRRUSMQ_CONFIG"]).read_text())["profile"]["local"]
        assert "batchBucket" in str(profile)


def test_a_parameter_without_a_value_is_refused(env) -> None:
    refused = _cli("dev", "--port", "0", "--parameter", "BatchStorage", env=env)
    assert refused.returncode == 2
    assert "KEY=VALUE" in refused.stdout + refused.stderr


def test_the_cli_finds_the_local_stack_through_its_profile(dev, env) -> None:
    process, banner = dev
    assert "profile       'local'" in banner["text"]
    assert "in memory only" in banner["text"]
    profile = tomllib.loads(Path(env["CIRRUSMQ_CONFIG"]).read_text())["profile"]["local"]
    assert profile["endpoint"] == banner["HTTP API"]
    assert oct(Path(env["CIRRUSMQ_CONFIG"]).stat().st_mode & 0o777) == "0o600"

    created = _cli("topic", "create", "orders", "--queues", "2", env=env)
    assert created.returncode == 0, created.stdout + created.stderr
    listed = _cli("topic", "list", "--json", env=env)  # nothing given: the 'local' profile
    assert listed.returncode == 0 and "orders" in listed.stdout, listed.stderr
    # global options before the command, as people type them
    before = _cli("--endpoint", banner["HTTP API"], "topic", "list", "--json", env=env)
    assert before.returncode == 0 and "orders" in before.stdout, before.stderr
    wrong = _cli("--endpoint", "http://127.0.0.1:9", "topic", "list", env=env)
    assert wrong.returncode == 1  # the global option is used (and fails: nothing listens)


def test_kill_9_leaves_no_moto_orphan(dev) -> None:
    process, banner = dev
    children = [pid for pid in _children(process.pid) if _alive(pid)]
    assert len(children) == 1, children  # the moto server
    (moto_pid,) = children
    assert _port_open(banner["AWS (moto)"])

    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    deadline = time.monotonic() + 10
    while (_alive(moto_pid) or _port_open(banner["AWS (moto)"])) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(moto_pid), "the moto child outlived its parent"
    assert not _port_open(banner["AWS (moto)"])
    assert not _port_open(banner["HTTP API"])


def test_the_watcher_alone_ends_the_child(tmp_path: Path) -> None:
    """Without PR_SET_PDEATHSIG (another OS, or a spawn from a thread that ends): the
    parent watcher ends the child when its parent dies."""
    script = (
        "import subprocess, sys, os\n"
        "p = subprocess.Popen([sys.executable, '-m', 'cirrusmq_local.moto_serial', '-p', '0',\n"
        "                      '--parent-pid', str(os.getpid())])\n"
        "print(p.pid, flush=True)\n"
        "import time; time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    time.sleep(1.0)
    assert _alive(child)
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 60  # the child notices only once its imports are done
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def test_the_banner_names_the_console_and_where_the_cli_is(dev) -> None:
    _process, banner = dev
    assert f"console       {banner['HTTP API']}/console/" in banner["text"]
    cli = Path(sys.executable).parent / "cirrusmq"
    assert f"source {cli.parent}/activate" in banner["text"]
    assert str(cli) in banner["text"]


def test_requests_leave_the_terminal_quiet(dev, env) -> None:
    """Only the functions' ERROR lines reach the terminal without --verbose."""
    process, _banner = dev
    created = _cli("topic", "create", "quiet", "--queues", "1", env=env)
    assert created.returncode == 0, created.stdout + created.stderr
    assert _cli("topic", "list", env=env).returncode == 0
    process.send_signal(signal.SIGINT)
    assert process.stdout is not None
    rest = process.stdout.read()
    process.wait(30)
    assert "stopped." in rest
    assert "cirrusmq_broker" not in rest, rest


def test_a_port_in_use_is_named_with_its_likely_cause_and_the_way_out(env) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = _cli("dev", "--port", str(port), "--no-schedules", env=env)
    output = refused.stdout + refused.stderr
    assert refused.returncode == 1, output
    assert f"port {port} on 127.0.0.1 is in use" in output
    assert "another `make dev`" in output and "--port" in output
    assert "Errno" not in output
