"""Where clients find the endpoint and credentials: options, environment, profile file.

Order, first found wins, field by field:

1. explicit values (command-line options);
2. the profile named explicitly (``--profile``), if any;
3. the environment: ``CIRRUSMQ_ENDPOINT``, ``CIRRUSMQ_ACCESS_KEY``, ``CIRRUSMQ_SECRET_KEY``;
4. the profile named by ``CIRRUSMQ_PROFILE``, else ``default`` -- or, when the file has no
   ``default`` profile, ``local`` (which ``cirrusmq dev`` writes: the local stack's endpoint
   and credentials).

An endpoint given without keys that is the ``local`` profile's endpoint takes that profile's
keys (they belong to that stack): ``cirrusmq --endpoint <local stack> topic list`` works.

The profile file is TOML, ``~/.cirrusmq/config`` (or ``$CIRRUSMQ_CONFIG``)::

    [profile.default]
    endpoint = "http://127.0.0.1:8080"
    access_key = "local-admin"
    secret_key = "..."

A profile may carry the Spark data source's options for its stack as a sub-table,
``[profile.<name>.spark]`` (``cirrusmq dev`` writes them for ``local``), read by
:func:`load_spark_options` / ``cirrusmq.spark.options_from_profile``. A resolved
:class:`ClientConfig` says where its endpoint came from, for error messages.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .credentials import Credentials

__all__ = [
    "ClientConfig",
    "ConfigError",
    "default_config_path",
    "load_config",
    "load_spark_options",
    "save_profile",
]

ENDPOINT_VAR = "CIRRUSMQ_ENDPOINT"
ACCESS_KEY_VAR = "CIRRUSMQ_ACCESS_KEY"
SECRET_KEY_VAR = "CIRRUSMQ_SECRET_KEY"
PROFILE_VAR = "CIRRUSMQ_PROFILE"
CONFIG_VAR = "CIRRUSMQ_CONFIG"
DEFAULT_PROFILE = "default"
LOCAL_PROFILE = "local"
_FIELDS = ("endpoint", "access_key", "secret_key")
SPARK_TABLE = "spark"
"""``[profile.<name>.spark]``: the ``cirrusmq`` Spark data source's options for that stack."""


class ConfigError(ValueError):
    """The configuration is missing something or cannot be read."""


@dataclass(frozen=True)
class ClientConfig:
    """What a client needs to connect."""

    endpoint: str
    credentials: Credentials | None
    profile: str | None = None
    """The name of the profile in effect (its file section may be absent)."""
    endpoint_source: str | None = None
    """Where the endpoint came from, for messages: ``"the --endpoint option"``,
    ``"$CIRRUSMQ_ENDPOINT"`` or ``"profile 'local' in ~/.cirrusmq/config"``."""


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    override = environ.get(CONFIG_VAR)
    return Path(override) if override else Path.home() / ".cirrusmq" / "config"


def _read_profile(path: Path, name: str, *, required: bool) -> dict[str, Any]:
    """The client fields of ``[profile.<name>]`` (its sub-tables left out)."""
    profile = _profile_table(path, name, required=required)
    unknown = set(profile) - set(_FIELDS) - {SPARK_TABLE}
    if unknown:
        raise ConfigError(f"[profile.{name}] in {path}: unknown key(s) {sorted(unknown)}")
    return {k: str(v) for k, v in profile.items() if k in _FIELDS}


def _profile_table(path: Path, name: str, *, required: bool) -> dict[str, Any]:
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
    return profile


def load_spark_options(
    profile: str = LOCAL_PROFILE,
    *,
    config_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The ``cirrusmq`` Spark data source options stored with a profile
    (``[profile.<name>.spark]``; ``cirrusmq dev`` writes them for the ``local`` profile)."""
    path = Path(config_path) if config_path else default_config_path(environ)
    table = _profile_table(path, profile, required=True).get(SPARK_TABLE)
    if not isinstance(table, dict) or not table:
        hint = " (start `cirrusmq dev`: it writes them)" if profile == LOCAL_PROFILE else ""
        raise ConfigError(f"no [profile.{profile}.spark] options in {path}{hint}")
    return {str(k): str(v) for k, v in table.items()}


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
    layers: list[tuple[str, Mapping[str, Any]]] = [
        (
            "the --endpoint option",
            {"endpoint": endpoint, "access_key": access_key, "secret_key": secret_key},
        )
    ]
    if profile:
        layers.append((_profile_source(profile, path), _read_profile(path, profile, required=True)))
    layers.append(
        (
            f"${ENDPOINT_VAR}",
            {
                "endpoint": environ.get(ENDPOINT_VAR),
                "access_key": environ.get(ACCESS_KEY_VAR),
                "secret_key": environ.get(SECRET_KEY_VAR),
            },
        )
    )
    fallback = environ.get(PROFILE_VAR) or DEFAULT_PROFILE
    if not profile:
        found = _read_profile(path, fallback, required=PROFILE_VAR in environ)
        if not found and PROFILE_VAR not in environ and not (endpoint or environ.get(ENDPOINT_VAR)):
            # nothing else given: the local stack's profile (its keys go with its endpoint)
            found = _read_profile(path, LOCAL_PROFILE, required=False)
            fallback = LOCAL_PROFILE if found else fallback
        layers.append((_profile_source(fallback, path), found))
    values = {f: next((layer[f] for _, layer in layers if layer.get(f)), None) for f in _FIELDS}
    source = next((name for name, layer in layers if layer.get("endpoint")), None)
    if values["endpoint"] and not values["access_key"] and not profile:
        # an endpoint without keys: the local stack's keys go with the local stack's endpoint
        local = _read_profile(path, LOCAL_PROFILE, required=False)
        if local and _same_endpoint(local.get("endpoint"), values["endpoint"]):
            values["access_key"], values["secret_key"] = (
                local.get("access_key"),
                local.get("secret_key"),
            )
    if not values["endpoint"]:
        raise ConfigError(
            f"no endpoint: pass --endpoint, set {ENDPOINT_VAR}, or add a profile to {path}"
        )
    if bool(values["access_key"]) != bool(values["secret_key"]):
        raise ConfigError("an access key needs its secret key (and the other way round)")
    credentials = (
        Credentials(values["access_key"], values["secret_key"]) if values["access_key"] else None
    )
    return ClientConfig(values["endpoint"], credentials, profile or fallback, source)


def _profile_source(name: str, path: Path) -> str:
    home = Path.home()
    shown = f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)
    written = " (written by `cirrusmq dev`)" if name == LOCAL_PROFILE else ""
    return f"profile {name!r} in {shown}{written}"


def _same_endpoint(a: str | None, b: str | None) -> bool:
    return bool(a and b) and a.rstrip("/") == b.rstrip("/")


def save_profile(
    name: str,
    values: Mapping[str, str],
    path: str | os.PathLike[str] | None = None,
    *,
    spark_options: Mapping[str, str] | None = None,
) -> Path:
    """Write ``[profile.<name>]`` (endpoint, access_key, secret_key) and, if given, its
    ``[profile.<name>.spark]`` options into the profile file, replacing that profile's
    sections and keeping everything else; return the file's path.

    The file is created (mode 0600, it holds a secret key) with its directory if needed.
    """
    path = Path(path) if path else default_config_path()
    unknown = set(values) - set(_FIELDS)
    if unknown:
        raise ConfigError(f"unknown profile key(s) {sorted(unknown)}")
    try:
        text = path.read_text(encoding="utf-8")
        tomllib.loads(text)  # never rewrite a file we cannot read back
    except FileNotFoundError:
        text = ""
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    kept: list[str] = []
    skipping = False
    for line in text.splitlines():
        header = line.strip()
        if header.startswith("["):
            table = header.strip("[] ").replace(" ", "").replace('"', "")
            skipping = table == f"profile.{name}" or table.startswith(f"profile.{name}.")
        if not skipping:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    section = [f"[profile.{name}]"]
    section += [f"{key} = {_toml_string(values[key])}" for key in _FIELDS if values.get(key)]
    if spark_options:
        section += ["", f"[profile.{name}.{SPARK_TABLE}]"]
        section += [f"{_toml_string(k)} = {_toml_string(v)}" for k, v in spark_options.items()]
    body = "\n".join([*kept, *([""] if kept else []), *section]) + "\n"
    tomllib.loads(body)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(body)
    os.replace(tmp, path)
    return path


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
