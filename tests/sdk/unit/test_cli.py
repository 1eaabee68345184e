"""``cirrusmq send`` from stdin, with a stand-in producer (no service needed)."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future

import cirrusmq.cli.connection as commands
import cirrusmq.cli.send as send_command
import pytest
from cirrusmq import NotFoundError, SendReceipt
from cirrusmq.cli import app
from typer.testing import CliRunner


class LateProducer:
    """Futures complete on another thread after ``flush`` returned (as the real sender's may)."""

    def __init__(self, endpoint, credentials, *, fail: bool = False) -> None:
        self.endpoint = endpoint
        self.fail = fail
        self.sent: list[str] = []

    def __enter__(self) -> LateProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def send_async(self, message) -> Future:
        future: Future = Future()
        self.sent.append(message.body.decode())

        def complete() -> None:
            if self.fail:
                future.set_exception(NotFoundError("no such topic", code="TopicNotFound"))
            else:
                future.set_result(SendReceipt("id", message.topic, 0, len(self.sent)))

        threading.Timer(0.2, complete).start()
        return future

    def flush(self, timeout_s=None) -> None:
        pass  # the bookkeeping is drained; the futures are not complete yet


@pytest.fixture
def run(monkeypatch, tmp_path):
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://fake")
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)

    def run(fail: bool, lines: str):
        monkeypatch.setattr(
            commands,
            "Producer",
            lambda endpoint, credentials: LateProducer(endpoint, None, fail=fail),
        )
        return CliRunner().invoke(app, ["send", "topic"], input=lines)

    return run


def test_send_from_stdin_counts_failures_that_complete_after_flush(run):
    result = run(True, "a\nb\n\nc\n")
    assert result.exit_code == 1, result.output
    assert "3 message(s) failed" in result.output and "TopicNotFound" in result.output
    assert "sent" not in result.stdout


def test_send_from_stdin_reports_what_was_sent(run):
    result = run(False, "a\nb\nc\n")
    assert result.exit_code == 0, result.output
    assert "sent 3 message(s) to topic" in result.stdout


def test_lines_are_counted_first_only_in_a_regular_file(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("skip me\na\n\nb\r\nc\n")
    with path.open() as stream:
        stream.readline()  # what was read already does not count
        assert send_command.count_lines(stream) == 3
        assert [line.strip() for line in stream] == ["a", "", "b", "c"]  # rewound
    read, write = os.pipe()
    os.write(write, b"a\nb\n")
    os.close(write)
    with os.fdopen(read) as pipe:
        assert send_command.count_lines(pipe) is None
        assert pipe.read() == "a\nb\n"


def test_send_lines_from_a_file_sends_each_line(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i}\n" for i in range(5)))
    producer = LateProducer("http://fake", None)
    with path.open() as stream:
        sent, failures = send_command.send_lines(producer, lambda text: _Msg(text), stream)
    assert (sent, failures) == (5, [])
    assert producer.sent == [f"line {i}" for i in range(5)]


class _Msg:
    topic = "topic"

    def __init__(self, text: str) -> None:
        self.body = text.encode()
