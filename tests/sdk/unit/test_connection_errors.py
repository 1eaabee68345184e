"""A connection error names the endpoint, and on the command line where it came from
(option, environment variable or profile file) -- against a port nobody listens on."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from cirrusmq import Admin, TransportError
from cirrusmq.cli import app
from cirrusmq.config import load_config, save_profile
from typer.testing import CliRunner


@pytest.fixture
def closed_port() -> Iterator[str]:
    """The endpoint of a port that was free a moment ago (nothing listens on it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


@pytest.fixture
def cli(monkeypatch, tmp_path):
    config = tmp_path / "config"
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(config))
    for name in ("CIRRUSMQ_ENDPOINT", "CIRRUSMQ_ACCESS_KEY", "CIRRUSMQ_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)

    def run(*args: str, env: dict[str, str] | None = None) -> str:
        result = CliRunner().invoke(app, list(args), env=env)
        assert result.exit_code == 1, result.output
        return " ".join(result.output.split())  # the console may wrap long lines

    run.config = config  # type: ignore[attr-defined]
    return run


def test_the_sdk_names_the_endpoint_it_could_not_reach(closed_port) -> None:
    with Admin(closed_port, max_attempts=1) as admin, pytest.raises(TransportError) as caught:
        admin.list_topics()
    assert f"cannot connect to {closed_port}" in str(caught.value)
    assert "GET /v1/topics" in str(caught.value)
    assert caught.value.details["endpoint"] == closed_port


def test_the_cli_names_the_local_profile_a_stopped_dev_stack_left(cli, closed_port) -> None:
    save_profile(
        "local", {"endpoint": closed_port, "access_key": "a", "secret_key": "s"}, cli.config
    )
    output = cli("topic", "list")
    assert f"cannot connect to {closed_port}" in output
    assert f"the endpoint {closed_port} comes from profile 'local' in {cli.config}" in output
    assert "written by `cirrusmq dev`" in output


def test_the_cli_names_the_option_or_the_variable(cli, closed_port) -> None:
    assert "comes from the --endpoint option" in cli("topic", "list", "--endpoint", closed_port)
    assert "comes from the --endpoint option" in cli("--endpoint", closed_port, "topic", "list")
    by_env = cli("dlq", "list", "billing", env={"CIRRUSMQ_ENDPOINT": closed_port})
    assert (
        f"cannot connect to {closed_port}" in by_env and "comes from $CIRRUSMQ_ENDPOINT" in by_env
    )
    save_profile("prod", {"endpoint": closed_port}, cli.config)
    named = cli("txn", "list", "pg", "--profile", "prod")
    assert f"comes from profile 'prod' in {cli.config}" in named


def test_the_cli_prints_a_connection_error_once(closed_port, tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIRRUSMQ_")}
    env.update(CIRRUSMQ_CONFIG=str(tmp_path / "config"), CIRRUSMQ_ENDPOINT=closed_port)
    env.update(CIRRUSMQ_ACCESS_KEY="k", CIRRUSMQ_SECRET_KEY="s")
    done = subprocess.run(
        [sys.executable, "-m", "cirrusmq.cli", "topic", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert (done.stdout + done.stderr).count("cannot connect") == 1, done.stderr


def test_load_config_says_where_the_endpoint_came_from(tmp_path) -> None:
    path = tmp_path / "config"
    save_profile("default", {"endpoint": "https://default"}, path)
    assert load_config(environ={}, config_path=path).endpoint_source == (
        f"profile 'default' in {path}"
    )
    from_env = load_config(environ={"CIRRUSMQ_ENDPOINT": "https://env"}, config_path=path)
    assert from_env.endpoint_source == "$CIRRUSMQ_ENDPOINT"
    given = load_config(endpoint="https://x", environ={}, config_path=path)
    assert given.endpoint_source == "the --endpoint option"
