"""Where clients find the endpoint and credentials: options, environment, profile file.

Order, first found wins, field by field:

1. explicit values (command-line options);
2. the profile named explicitly (``--profile``), if any;
3. the environment: ``CIRRUSMQ_ENDPOINT``, ``CIRRUSMQ_ACCESS_KEY``, ``CIRRUSMQ_SECRET_KEY``;
4. the profile named by ``CIRRUSMQ_PROFILE``, else ``default``.

The profile file is TOML, ``~/.cirrusmq/config`` (or ``$CIRRUSMQ_CONFIG``)::

    [profile.default]
    endpoint = "http://127.0.0.1:8080"
    access_key = "local-admin"
    secret_key = "..."
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .credentials import Credentials

__all__ = ["ClientConfig", "ConfigError", "default_config_path", "load_config"]

ENDPOINT_VAR = "CIRRUSMQ_ENDPOINT"
ACCESS_KEY_VAR = "CIRRUSMQ_ACCESS_KEY"
SECRET_KEY_VAR = "CIRRUSMQ_SECRET_KEY"
PROFILE_VAR = "CIRRUSMQ_PROFILE"
CONFIG_VAR = "CIRRUSMQ_CONFIG"
DEFAULT_PROFILE = "default"
_FIELDS = ("endpoint", "access_key", "secret_key")


class ConfigError(ValueError):
    """The configuration is missing something or cannot be read."""


@dataclass(frozen=True)
class ClientConfig:
    """What a client needs to connect."""

    endpoint: str
    credentials: Credentials | None
    profile: str | None = None
    """The name of the profile in effect (its file section may be absent)."""


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    override = environ.get(CONFIG_VAR)
    return Path(override) if override else Path.home() / ".cirrusmq" / "config"


def _read_profile(path: Path, name: str, *, required: bool) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        if required:
            raise ConfigError(f"profile {name!r} requested but {path} does not exist") from None
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    profile = document.get("profile", {}).get(name)
    if profile is None:
        if required:
            raise ConfigError(f"no [profile.{name}] section in {path}")
        return {}
    if not isinstance(profile, dict):
        raise ConfigError(f"[profile.{name}] in {path} is not a table")
    unknown = set(profile) - set(_FIELDS)
    if unknown:
        raise ConfigError(f"[profile.{name}] in {path}: unknown key(s) {sorted(unknown)}")
    return {k: str(v) for k, v in profile.items()}


def load_config(
    *,
    endpoint: str | None = None,
    access_key: str | None = None,
    secret_key: str | None = None,
    profile: str | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: str | os.PathLike[str] | None = None,
) -> ClientConfig:
    """Resolve the endpoint and credentials (see the module docs for the order)."""
    environ = os.environ if environ is None else environ
    path = Path(config_path) if config_path else default_config_path(environ)
    layers: list[Mapping[str, Any]] = [
        {"endpoint": endpoint, "access_key": access_key, "secret_key": secret_key}
    ]
    if profile:
        layers.append(_read_profile(path, profile, required=True))
    layers.append(
        {
            "endpoint": environ.get(ENDPOINT_VAR),
            "access_key": environ.get(ACCESS_KEY_VAR),
            "secret_key": environ.get(SECRET_KEY_VAR),
        }
    )
    fallback = environ.get(PROFILE_VAR) or DEFAULT_PROFILE
    if not profile:
        layers.append(_read_profile(path, fallback, required=PROFILE_VAR in environ))
    values = {f: next((layer[f] for layer in layers if layer.get(f)), None) for f in _FIELDS}
    if not values["endpoint"]:
        raise ConfigError(
            f"no endpoint: pass --endpoint, set {ENDPOINT_VAR}, or add a profile to {path}"
        )
    if bool(values["access_key"]) != bool(values["secret_key"]):
        raise ConfigError("an access key needs its secret key (and the other way round)")
    credentials = (
        Credentials(values["access_key"], values["secret_key"]) if values["access_key"] else None
    )
    return ClientConfig(values["endpoint"], credentials, profile or fallback)
