"""The ``cirrusmq`` client commands against the local stack (typer's test runner)."""

from __future__ import annotations

import json

import pytest
from cirrusmq import Admin, Credentials
from cirrusmq.cli import app
from typer.testing import CliRunner

from .conftest import unique


@pytest.fixture
def cli(endpoint, credentials, tmp_path, monkeypatch):
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    runner = CliRunner()

    def run(*args: str, input: str | None = None, code: int = 0):
        result = runner.invoke(app, list(args), input=input)
        assert result.exit_code == code, result.output
        return result

    return run


def test_topic_commands(cli):
    name = unique("cli")
    assert f"created topic {name}" in cli("topic", "create", name, "--queues", "2").output
    listing = cli("topic", "list").output
    assert name in listing and "NORMAL" in listing
    listed = json.loads(cli("topic", "list", "--json").output)
    assert any(t["name"] == name and t["queues"] == 2 for t in listed)
    described = json.loads(cli("topic", "describe", name, "--json").output)
    assert [q["queue"] for q in described["queue_offsets"]] == [0, 1]
    assert "0 message(s) retained" in cli("topic", "describe", name).output
    cli("topic", "delete", name, input="n\n", code=1)  # asks first
    assert f"deleted topic {name}" in cli("topic", "delete", name, "--yes").output
    failed = cli("topic", "describe", name, code=1)
    assert "TopicNotFound" in failed.output


def test_send_consume_and_describe_group(cli, topic, group):
    sent = cli(
        "send", topic, "--body", "hello", "--tag", "A", "--key", "k1", "--group", "g", "-p", "x=1"
    ).output
    assert sent.startswith("sent ") and f"to {topic}" in sent
    lines = "".join(f"line {i}\n" for i in range(200)) + "\n"
    assert f"sent 200 message(s) to {topic}" in cli("send", topic, input=lines).output
    peek = cli("consume", group, topic, "--filter", "A", "--max", "1", "--wait", "0.5").output
    assert "hello" in peek and "tag=A" in peek and "keys=k1" in peek
    consumed = cli("consume", unique("g"), topic, "--ack", "--json", "--wait", "0.5")
    bodies = [json.loads(line)["body"] for line in consumed.stdout.splitlines()]
    assert sorted(bodies) == sorted(["hello", *(f"line {i}" for i in range(200))])
    assert "201 message(s) acked" in consumed.output
    described = json.loads(cli("group", "describe", group, "--topic", topic, "--json").output)
    assert sum(q["inflight"] for q in described["queues"]) == 1
    (held,) = [q for q in described["queues"] if q["inflight"]]
    assert held["oldest_unacked_attempt"] == 1
    assert described["subscriptions"] == [
        {"group": group, "topic": topic, "filter": "A", "filter_type": "TAG"}
    ]
    assert described["max_delivery_attempts"] == 16
    shown = cli("group", "describe", group).output
    assert "lag" in shown and "oldest unacked" in shown
    assert any(topic in line and " TAG " in line for line in shown.splitlines())
    assert "max delivery attempts 16" in shown
    listed = json.loads(cli("group", "list", "--json").output)
    assert {"group": group, "topics": [topic]} in listed
    assert group in cli("group", "list").output
    assert f"group {group}:" in cli("group", "metrics", group, "--minutes", "5").output


def test_profiles_and_missing_configuration(cli, endpoint, credentials, tmp_path, monkeypatch):
    (tmp_path / "config").write_text(
        f'[profile.local]\nendpoint = "{endpoint}"\n'
        f'access_key = "{credentials.access_key}"\nsecret_key = "{credentials.secret_key}"\n'
        '[profile.broken]\nendpoint = "http://127.0.0.1:9"\n'
    )
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://127.0.0.1:9")  # unreachable
    monkeypatch.delenv("CIRRUSMQ_ACCESS_KEY")
    monkeypatch.delenv("CIRRUSMQ_SECRET_KEY")
    assert "topic(s)" in cli("topic", "list", "--profile", "local").output
    keys = ["--access-key", credentials.access_key, "--secret-key", credentials.secret_key]
    assert "topic(s)" in cli("topic", "list", "--endpoint", endpoint, *keys).output
    # the local stack's endpoint without keys takes the 'local' profile's keys ...
    assert "topic(s)" in cli("topic", "list", "--endpoint", endpoint).output
    # ... any other endpoint without keys goes unsigned, and is told so
    elsewhere = endpoint.replace("127.0.0.1", "localhost")
    unsigned = cli("topic", "list", "--endpoint", elsewhere, code=1).output
    assert "MissingSignature" in unsigned and "no credentials?" in unsigned
    assert "ConnectError" in cli("topic", "list", code=1).output  # the environment's endpoint
    assert "no [profile.nope]" in cli("topic", "list", "--profile", "nope", code=1).output
    monkeypatch.delenv("CIRRUSMQ_ENDPOINT")
    # nothing given and no 'default' profile: the 'local' one (which `cirrusmq dev` writes)
    assert "topic(s)" in cli("topic", "list").output
    (tmp_path / "config").write_text('[profile.broken]\nendpoint = "http://127.0.0.1:9"\n')
    assert "no endpoint" in cli("topic", "list", code=1).output


def test_key_bootstrap_writes_a_working_admin_key(cirrusmq_stack, endpoint, monkeypatch):
    """A deployed stack's first admin key, written with AWS credentials (here: moto's)."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", cirrusmq_stack.aws_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    result = CliRunner().invoke(
        app,
        [
            "key",
            "bootstrap",
            "--table",
            cirrusmq_stack.resources["AccessKeysTable"],
            "--kms-key",
            cirrusmq_stack.resources["AccessKeySecretsKey"],
            "--region",
            "us-east-1",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.stdout.splitlines()]
    access_key = next(words[-1] for words in lines if words[:2] == ["access", "key"])
    secret_key = next(words[-1] for words in lines if words[:2] == ["secret", "key"])
    created = Credentials(access_key, secret_key)
    with Admin(endpoint, created) as admin:
        assert access_key in [k.access_key for k in admin.list_access_keys()]


def test_send_body_file_of_5_mib_consume_summary_and_save_bodies(cli, topic, group, tmp_path):
    import hashlib
    import os

    size = 5 * 1024 * 1024 + 7
    original = os.urandom(size)
    digest = hashlib.sha256(original).hexdigest()
    source = tmp_path / "big.bin"
    source.write_bytes(original)
    sent = cli("send", topic, "--body-file", str(source), "--tag", "big").output
    assert sent.startswith("sent ") and f"to {topic}" in sent
    message_id = sent.split()[1]

    saved = tmp_path / "saved"
    consumed = cli(
        "consume", group, topic, "--max", "1", "--wait", "2", "--save-bodies", str(saved)
    )
    (line,) = [x for x in consumed.stdout.splitlines() if message_id in x]
    assert f"[large body {size} B sha256 {digest[:16]}…]" in line
    assert len(line) < 300  # a summary, not the body
    assert (saved / message_id).read_bytes() == original
    assert f"saved {saved / message_id}" in consumed.stderr

    read = cli("read", topic, "--queue", sent.split("queue ")[1].split()[0], "--json")
    (record,) = [json.loads(x) for x in read.stdout.splitlines()]
    assert record["body"] is None
    pointer = record["large_body"]
    assert (pointer["size"], pointer["sha256"]) == (size, digest)
    assert pointer["key"] and pointer["url"].startswith("http")


def test_send_small_body_file_goes_inline(cli, topic, group, tmp_path):
    source = tmp_path / "small.txt"
    source.write_text("from a file")
    cli("send", topic, "--body-file", str(source))
    consumed = cli("consume", group, topic, "--max", "1", "--wait", "2", "--json")
    (record,) = [json.loads(x) for x in consumed.stdout.splitlines()]
    assert record["body"] == "from a file" and record["large_body"] is None


def test_send_refuses_body_and_body_file_together(cli, topic, tmp_path):
    source = tmp_path / "b.txt"
    source.write_text("x")
    failed = cli("send", topic, "--body", "y", "--body-file", str(source), code=2)
    assert "--body-file" in failed.output


def test_message_find_shows_and_saves_a_large_body(cli, topic, tmp_path):
    import os

    original = os.urandom(4 * 1024 * 1024 + 1)
    source = tmp_path / "big.bin"
    source.write_bytes(original)
    message_id = cli("send", topic, "--body-file", str(source), "--key", "k9").output.split()[1]
    saved = tmp_path / "saved"
    found = cli("message", "find", "--topic", topic, "--key", "k9", "--save-bodies", str(saved))
    assert f"[large body {len(original)} B sha256 " in found.stdout
    assert (saved / message_id).read_bytes() == original
    assert not (saved / f"{message_id}.part").exists()


def test_a_body_failing_its_check_is_not_saved_nor_acked(
    cli, endpoint, credentials, topic, group, tmp_path
):
    import hashlib
    import os

    from cirrusmq import Message, Producer

    with Producer(endpoint, credentials) as producer:
        uploaded = producer._offloaded(Message(topic, os.urandom(5 * 1024 * 1024))).large_body
        assert uploaded is not None
        wrong = type(uploaded)(uploaded.key, uploaded.size, hashlib.sha256(b"other").hexdigest())
        message_id = producer.send(Message(topic, b"", large_body=wrong)).message_id
    saved = tmp_path / "saved"
    consumed = cli(
        "consume", group, topic, "--ack", "--wait", "2", "--save-bodies", str(saved), code=1
    )
    assert f"not saved {message_id}: LargeBodyMismatch" in consumed.stderr
    assert not (saved / message_id).exists() and not (saved / f"{message_id}.part").exists()
    described = json.loads(cli("group", "describe", group, "--topic", topic, "--json").output)
    assert sum(q["inflight"] for q in described["queues"]) == 1  # not acked: it comes back
