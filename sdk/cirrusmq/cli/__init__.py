"""The ``cirrusmq`` command line: one module per command group.

``connection`` declares the connection options once (before the command they go to the root
callback, which keeps them in typer's context; after it :func:`~.connection.connected` adds
them) and opens the clients; ``output`` prints; ``topics``, ``groups``, ``keys``, ``outbox``,
``send``, ``consume``, ``offsets``, ``messages``, ``dlq``, ``transactions`` and ``dev`` are
the commands; ``cirrusmq spark`` comes from :mod:`cirrusmq.spark.cli`.
"""

from __future__ import annotations

import logging

import typer

from . import (
    consume,
    dev,
    dlq,
    groups,
    keys,
    messages,
    offsets,
    outbox,
    send,
    topics,
    transactions,
)
from .connection import AccessKey, Endpoint, Profile, SecretKey, root_connection
from .dev import write_local_profile

__all__ = ["app", "main", "write_local_profile"]

app = typer.Typer(help="CirrusMQ: a serverless message queue with RocketMQ semantics.")


def _show_version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"cirrusmq {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """CirrusMQ command line.

    The connection options work before the command (cirrusmq --endpoint URL topic list) and
    after it. Without any, the CLI uses CIRRUSMQ_* variables, else the 'default' profile in
    ~/.cirrusmq/config, else the 'local' profile that `cirrusmq dev` writes.
    """
    root_connection(ctx, endpoint, access_key, secret_key, profile)


app.add_typer(topics.app, name="topic")
app.add_typer(groups.app, name="group")
app.add_typer(outbox.app, name="outbox")
app.add_typer(keys.app, name="key")
app.command("send")(send.send)
app.command("cancel-scheduled")(send.cancel_scheduled)
app.command("consume")(consume.consume)
app.add_typer(dlq.app, name="dlq")
app.add_typer(transactions.app, name="txn")
app.add_typer(offsets.app, name="offsets")
app.add_typer(messages.app, name="message")
app.command("read")(offsets.read)

from ..spark.cli import spark_app  # noqa: E402  (typer only; pyspark loads when a job runs)

app.add_typer(spark_app, name="spark")
app.command()(dev.dev)


def main() -> None:
    """Entry point of the ``cirrusmq`` script."""
    quiet_sdk_log()
    app()


def quiet_sdk_log() -> None:
    """The SDK's log lines stay out of the terminal: a command reports its failure itself,
    in one line (``connection.reported_errors``), and ``cirrusmq dev`` sets up its own log."""
    logging.getLogger("cirrusmq").addHandler(logging.NullHandler())
