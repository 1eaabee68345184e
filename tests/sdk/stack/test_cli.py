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
