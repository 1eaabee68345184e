"""The connection options of the client commands, declared once, and the clients they build.

``--endpoint``, ``--access-key``, ``--secret-key`` and ``--profile`` work before the command
(``cirrusmq --endpoint URL topic list``: the root callback puts them in typer's context,
``ctx.obj``) and after it (:func:`connected` adds them to a command and merges them over the
context's; the command's own win). A command decorated with :func:`connected` receives one
:class:`Connection`, which resolves the configuration (see :mod:`cirrusmq.config` for the order
in which options, environment and profile file are consulted) and opens the clients.
SDK and configuration errors become a one-line message and exit status 1
(:func:`reported_errors`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape

from ..admin import Admin
from ..config import ClientConfig, ConfigError, load_config
from ..consumer import SimpleConsumer
from ..errors import AuthenticationError, MQError, TransportError
from ..producer import Producer
from ..transaction import TransactionAdmin
from ..transport import Transport
from .output import err

__all__ = [
    "AccessKey",
    "Connection",
    "Endpoint",
    "Profile",
    "SecretKey",
    "connected",
    "reported_errors",
]

Endpoint = Annotated[
    str | None,
    typer.Option(help="API base URL (env CIRRUSMQ_ENDPOINT).", show_default=False),
]
AccessKey = Annotated[
    str | None,
    typer.Option(help="Access key (env CIRRUSMQ_ACCESS_KEY).", show_default=False),
]
SecretKey = Annotated[
    str | None,
    typer.Option(help="Secret key (env CIRRUSMQ_SECRET_KEY).", show_default=False),
]
Profile = Annotated[
    str | None,
    typer.Option(
        help="Profile in ~/.cirrusmq/config (env CIRRUSMQ_PROFILE; default 'default').",
        show_default=False,
    ),
]

_RESOLVED: ContextVar[ClientConfig | None] = ContextVar("cirrusmq_cli_config", default=None)
"""The configuration the running command resolved (for error messages)."""


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn SDK and configuration errors into a one-line message and exit status 1."""
    token = _RESOLVED.set(None)
    try:
        yield
    except (MQError, ConfigError, RuntimeError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        if isinstance(exc, AuthenticationError) and exc.code == "MissingSignature":
            err.print(
                "no credentials? pass --access-key and --secret-key, set CIRRUSMQ_ACCESS_KEY and "
                "CIRRUSMQ_SECRET_KEY, or add them to a profile"
            )
        resolved = _RESOLVED.get()
        if isinstance(exc, TransportError) and resolved and resolved.endpoint_source:
            err.print(
                f"the endpoint {escape(resolved.endpoint)} comes from "
                f"{escape(resolved.endpoint_source)}",
                markup=True,
            )
        raise typer.Exit(1) from exc
    finally:
        _RESOLVED.reset(token)


@dataclass(frozen=True)
class Connection:
    """The connection options given on the command line (None: not given)."""

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    profile: str | None = None

    def over(self, given: Connection) -> Connection:
        """These options with those ``given`` after the command taking precedence."""
        return Connection(
            given.endpoint or self.endpoint,
            given.access_key or self.access_key,
            given.secret_key or self.secret_key,
            given.profile or self.profile,
        )

    def config(self) -> ClientConfig:
        """The resolved configuration (remembered for the error messages)."""
        config = load_config(
            endpoint=self.endpoint,
            access_key=self.access_key,
            secret_key=self.secret_key,
            profile=self.profile,
        )
        _RESOLVED.set(config)
        return config

    @contextmanager
    def admin(self) -> Iterator[Admin]:
        """An :class:`~cirrusmq.Admin`; errors inside are reported as the CLI does."""
        with reported_errors():
            cfg = self.config()
            with Admin(cfg.endpoint, cfg.credentials) as admin:
                yield admin

    @contextmanager
    def transaction_admin(self) -> Iterator[TransactionAdmin]:
        """A :class:`~cirrusmq.TransactionAdmin`; errors inside are reported."""
        with reported_errors():
            cfg = self.config()
            with TransactionAdmin(cfg.endpoint, cfg.credentials) as admin:
                yield admin

    @contextmanager
    def producer(self, **options: Any) -> Iterator[Producer]:
        """A :class:`~cirrusmq.Producer` with ``options``; errors inside are reported."""
        with reported_errors():
            cfg = self.config()
            with Producer(cfg.endpoint, cfg.credentials, **options) as producer:
                yield producer

    @contextmanager
    def simple_consumer(self, *args: Any) -> Iterator[SimpleConsumer]:
        """A :class:`~cirrusmq.SimpleConsumer` (group, subscriptions, await duration);
        errors inside are reported."""
        with reported_errors():
            cfg = self.config()
            with SimpleConsumer(cfg.endpoint, cfg.credentials, *args) as consumer:
                yield consumer

    @contextmanager
    def transport(self) -> Iterator[Transport]:
        """A signed :class:`~cirrusmq.transport.Transport` for raw requests; errors inside
        are reported."""
        with reported_errors():
            cfg = self.config()
            transport = Transport(cfg.endpoint, cfg.credentials)
            try:
                yield transport
            finally:
                transport.close()


def root_connection(
    ctx: typer.Context,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Keep the options given before the command in the context (``ctx.obj``)."""
    ctx.obj = Connection(endpoint, access_key, secret_key, profile)


_OPTIONS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
    for name, annotation in (
        ("endpoint", Endpoint),
        ("access_key", AccessKey),
        ("secret_key", SecretKey),
        ("profile", Profile),
    )
]
_CONTEXT = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)

Command = TypeVar("Command", bound=Callable[..., Any])


def connected(command: Command) -> Command:
    """Give ``command`` the four connection options (after its own, as typer shows them) and
    call it with ``connection=``: the context's options with these over them."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "connection"]

    @functools.wraps(command)
    def run(*args: Any, ctx: typer.Context, **kwargs: Any) -> Any:
        given = Connection(*(kwargs.pop(p.name) for p in _OPTIONS))
        before = ctx.obj if isinstance(ctx.obj, Connection) else Connection()
        return command(*args, connection=before.over(given), **kwargs)

    parameters = [*own, _CONTEXT, *_OPTIONS]
    run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run  # type: ignore[return-value]
