"""The ``local`` profile (written by ``cirrusmq dev``), global options, ``--version``."""

from __future__ import annotations

import tomllib

import cirrusmq.cli.connection as commands
import pytest
from cirrusmq import __version__
from cirrusmq.cli import app
from cirrusmq.config import LOCAL_PROFILE, ConfigError, load_config, save_profile
from cirrusmq.credentials import Credentials
from typer.testing import CliRunner

LOCAL = {"endpoint": "http://127.0.0.1:8080", "access_key": "local-admin", "secret_key": "s"}


def test_save_profile_replaces_its_section_and_keeps_the_rest(tmp_path) -> None:
    path = tmp_path / "dir" / "config"
    path.parent.mkdir()
    path.write_text(
        '# mine\n[profile.prod]\nendpoint = "https://x"\n\n'
        '[profile.local]\nendpoint = "http://old"\n\n[profile.other]\nendpoint = "https://o"\n'
    )
    save_profile("local", LOCAL, path)
    save_profile("local", {**LOCAL, "secret_key": 'q"\\'}, path)
    document = tomllib.loads(path.read_text())
    assert document["profile"]["prod"] == {"endpoint": "https://x"}
    assert document["profile"]["other"] == {"endpoint": "https://o"}
    assert document["profile"]["local"] == {**LOCAL, "secret_key": 'q"\\'}
    assert path.read_text().startswith("# mine\n")
    assert path.stat().st_mode & 0o777 == 0o600


def test_save_profile_creates_the_file_and_refuses_broken_toml(tmp_path) -> None:
    path = tmp_path / "new" / "config"
    save_profile("local", LOCAL, path)
    assert tomllib.loads(path.read_text())["profile"]["local"] == LOCAL
    path.write_text("[profile.local\n")
    with pytest.raises(ConfigError):
        save_profile("local", LOCAL, path)


def test_the_local_profile_applies_when_nothing_else_is_given(tmp_path) -> None:
    path = tmp_path / "config"
    save_profile("local", LOCAL, path)
    config = load_config(environ={}, config_path=path)
    assert (config.endpoint, config.profile) == (LOCAL["endpoint"], "local")
    assert config.credentials is not None and config.credentials.access_key == "local-admin"
    # an endpoint given another way does not borrow the local stack's keys
    other = load_config(environ={"CIRRUSMQ_ENDPOINT": "https://prod"}, config_path=path)
    assert (other.endpoint, other.credentials) == ("https://prod", None)
    explicit = load_config(endpoint="https://prod", environ={}, config_path=path)
    assert explicit.credentials is None
    # a default profile wins; CIRRUSMQ_PROFILE names one explicitly
    save_profile("default", {"endpoint": "https://default"}, path)
    assert load_config(environ={}, config_path=path).endpoint == "https://default"
    named = load_config(environ={"CIRRUSMQ_PROFILE": "local"}, config_path=path)
    assert named.endpoint == LOCAL["endpoint"]


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"cirrusmq {__version__}"


@pytest.mark.parametrize(
    "argv",
    [
        ["--endpoint", "http://given", "topic", "list"],
        ["topic", "list", "--endpoint", "http://given"],
        ["--endpoint", "http://other", "topic", "list", "--endpoint", "http://given"],
    ],
)
def test_connection_options_before_or_after_the_command(argv, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    for name in ("CIRRUSMQ_ENDPOINT", "CIRRUSMQ_PROFILE", "CIRRUSMQ_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    seen = []

    class FakeAdmin:
        def __init__(self, endpoint, credentials) -> None:
            seen.append(endpoint)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def list_topics(self):
            return []

    monkeypatch.setattr(commands, "Admin", FakeAdmin)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert seen == ["http://given"]
    # the next invocation does not inherit the previous one's global options
    again = CliRunner().invoke(app, ["topic", "list"])
    assert again.exit_code == 1 and "no endpoint" in again.output


def test_an_endpoint_without_keys_takes_the_local_stacks_keys_only_for_its_endpoint(tmp_path):
    config = tmp_path / "config"
    save_profile(
        LOCAL_PROFILE,
        {"endpoint": "http://127.0.0.1:8080", "access_key": "local-admin", "secret_key": "s"},
        config,
    )
    same = load_config(endpoint="http://127.0.0.1:8080/", environ={}, config_path=config)
    assert same.credentials == Credentials("local-admin", "s")
    other = load_config(endpoint="https://api.example.com", environ={}, config_path=config)
    assert other.credentials is None


SPARK = {
    "bucket": "local-messagebucket-1",
    "logIndexTable": "local-LogIndexTable",
    "queueHeadsTable": "local-QueueHeadsTable",
    "endpoint": "http://127.0.0.1:5000",
    "accessKeyId": "testing",
    "clockOffsetMs": "0",
}


def test_a_profile_keeps_the_spark_options_of_its_stack(tmp_path) -> None:
    from cirrusmq.spark import options_from_profile

    path = tmp_path / "config"
    save_profile("prod", {"endpoint": "https://prod"}, path)
    save_profile("local", LOCAL, path, spark_options={**SPARK, "bucket": "old"})
    save_profile("local", LOCAL, path, spark_options=SPARK)  # replaced, not duplicated
    assert options_from_profile("local", config_path=path) == SPARK
    config = load_config(environ={"CIRRUSMQ_PROFILE": "local"}, config_path=path)
    assert (config.endpoint, config.credentials.access_key) == (LOCAL["endpoint"], "local-admin")
    assert tomllib.loads(path.read_text())["profile"]["prod"] == {"endpoint": "https://prod"}
    save_profile("local", LOCAL, path)  # without options: the old ones go too
    with pytest.raises(ConfigError, match=r"no \[profile.local.spark\].*cirrusmq dev"):
        options_from_profile("local", config_path=path)


def test_options_from_profile_reads_cirrusmq_config(tmp_path, monkeypatch) -> None:
    from cirrusmq.spark import options_from_profile

    path = tmp_path / "elsewhere.toml"
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(path))
    with pytest.raises(ConfigError, match="does not exist"):
        options_from_profile()
    save_profile("local", LOCAL, path, spark_options=SPARK)
    assert options_from_profile() == SPARK


def test_the_spark_jobs_start_from_a_profiles_options(tmp_path, monkeypatch) -> None:
    from cirrusmq.spark.cli import _options

    path = tmp_path / "config"
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(path))
    monkeypatch.delenv("CIRRUSMQ_SPARK_OPTIONS", raising=False)
    save_profile("local", LOCAL, path, spark_options=SPARK)
    merged = _options(["bucket=mine"], None, "local")
    assert merged == {**SPARK, "bucket": "mine"}  # the explicit options win
    refused = CliRunner().invoke(
        app, ["spark", "stats", "--topic", "t", "--output", "x", "--options-profile", "nope"]
    )
    assert refused.exit_code == 2 and "no [profile.nope]" in refused.output
