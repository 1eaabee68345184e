"""Where the endpoint and credentials come from."""

from __future__ import annotations

import pytest
from cirrusmq.config import ConfigError, load_config

FILE = """
[profile.default]
endpoint = "http://default"
access_key = "dk"
secret_key = "ds"

[profile.prod]
endpoint = "https://prod"
access_key = "pk"
secret_key = "ps"
"""


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "config"
    p.write_text(FILE)
    return p


def test_options_beat_everything(path):
    env = {"CIRRUSMQ_ENDPOINT": "http://env"}
    cfg = load_config(endpoint="http://opt", environ=env, config_path=path, profile="prod")
    assert cfg.endpoint == "http://opt" and cfg.credentials.access_key == "pk"


def test_an_explicit_profile_beats_the_environment(path):
    env = {
        "CIRRUSMQ_ENDPOINT": "http://env",
        "CIRRUSMQ_ACCESS_KEY": "ek",
        "CIRRUSMQ_SECRET_KEY": "es",
    }
    assert load_config(environ=env, config_path=path, profile="prod").endpoint == "https://prod"
    cfg = load_config(environ=env, config_path=path)
    assert (cfg.endpoint, cfg.credentials.access_key) == ("http://env", "ek")


def test_the_default_profile_fills_the_gaps(path):
    cfg = load_config(environ={"CIRRUSMQ_ENDPOINT": "http://env"}, config_path=path)
    assert (cfg.endpoint, cfg.credentials.secret_key) == ("http://env", "ds")
    cfg = load_config(environ={"CIRRUSMQ_PROFILE": "prod"}, config_path=path)
    assert cfg.endpoint == "https://prod" and cfg.profile == "prod"


def test_errors(path, tmp_path):
    with pytest.raises(ConfigError, match="no endpoint"):
        load_config(environ={}, config_path=tmp_path / "missing")
    with pytest.raises(ConfigError, match="profile.nope"):
        load_config(environ={}, config_path=path, profile="nope")
    with pytest.raises(ConfigError, match="secret key"):
        load_config(endpoint="http://x", access_key="a", environ={}, config_path=tmp_path / "m")
    (tmp_path / "bad").write_text("[profile.x]\nendpoint = 1\nregion = 'eu'\n")
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(environ={}, config_path=tmp_path / "bad", profile="x")
    assert (
        load_config(endpoint="http://x", environ={}, config_path=path).credentials.access_key
        == "dk"
    )
