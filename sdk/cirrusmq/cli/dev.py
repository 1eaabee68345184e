"""``cirrusmq dev``: the whole backend locally, and the ``local`` profile that points at it."""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

import typer

__all__ = ["dev", "parameter_overrides", "port_taken_message", "write_local_profile"]

FUNCTIONS_LOGGER = "cirrusmq_broker"
"""The functions' Powertools logger: its lines reach the stack's telemetry (which echoes the
ERROR ones, every one with --verbose), never the terminal's logging handler a second time."""


def dev(
    host: str = typer.Option("127.0.0.1", help="Interface the HTTP API listens on."),
    port: int = typer.Option(8080, help="Port of the HTTP API (0 picks a free one)."),
    template: Path | None = typer.Option(
        None, exists=True, dir_okay=False, help="SAM template (default: the repo's template.yaml)."
    ),
    schedules: bool = typer.Option(True, help="Run the template's Schedule events on timers."),
    write_profile: bool = typer.Option(
        True,
        help="Write the endpoint and credentials as the 'local' profile in ~/.cirrusmq/config "
        "(or $CIRRUSMQ_CONFIG), which the CLI uses when nothing else is given.",
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Log every request and follow the functions' logs (by default only their errors).",
    ),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        file_okay=False,
        help="Keep topics, messages, groups, offsets and keys in this folder across restarts "
        "(a write-ahead journal, fsync'd before each answer, plus snapshots). `make dev` "
        "uses .cirrusmq-data/ in the checkout.",
    ),
    ephemeral: bool = typer.Option(
        False,
        "--ephemeral",
        help="Keep everything in memory only (gone when the stack stops), even with --data-dir.",
    ),
    parameter: list[str] = typer.Option(
        [],
        "--parameter",
        "-p",
        help="A template parameter as KEY=VALUE (repeat it), as sam deploy's "
        "--parameter-overrides: e.g. -p BatchStorage=express -p ExpressZoneId=use1-az4.",
    ),
) -> None:
    """Run the whole backend locally (moto + the template's resources, routes and schedules)."""
    parameters = parameter_overrides(parameter)
    try:
        from cirrusmq_local import LocalStack, TemplateError
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        typer.echo(
            f"the local stack needs the [local] extra: pip install 'cirrusmq[local]' ({exc})"
        )
        raise typer.Exit(2) from exc
    taken = port_taken_message(host, port)
    if taken is not None:  # before moto starts: a second `make dev` fails at once
        typer.echo(taken, err=True)
        raise typer.Exit(1)
    _configure_logging(verbose)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    stack = LocalStack(
        template,
        host=host,
        port=port,
        schedules=schedules,
        function_logs=lambda line: typer.echo(line, err=True),
        follow_logs=verbose,
        parameters=parameters,
        data_dir=None if ephemeral else data_dir,
    )
    try:
        try:
            stack.start()
        except OSError as exc:
            taken = port_taken_message(host, port) if exc.errno == errno.EADDRINUSE else None
            typer.echo(taken or f"cannot start the local stack: {exc}", err=True)
            raise typer.Exit(1) from exc
        except (TemplateError, RuntimeError) as exc:
            typer.echo(f"cannot start the local stack: {exc}", err=True)
            raise typer.Exit(1) from exc
        profile_path = write_local_profile(stack) if write_profile else None
        _print_summary(stack, profile_path)
        while not stop.wait(0.5):
            pass
        typer.echo("stopping...")
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    typer.echo("stopped.")


def port_taken_message(host: str, port: int) -> str | None:
    """Why the HTTP API cannot listen on ``host:port`` when something holds it, else None."""
    if port == 0:
        return None
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return None  # another problem: the stack's own start reports it
        else:
            return None
    return (
        f"cannot start the local stack: port {port} on {host} is in use — most likely "
        "another `make dev` (or `cirrusmq dev`) still runs: stop it with Ctrl-C in its "
        f"terminal, or start this one on another port: `make dev ARGS='--port {port + 1}'` "
        f"(`cirrusmq dev --port {port + 1}`; 0 picks a free one)"
    )


def _configure_logging(verbose: bool) -> None:
    """The launcher's own lines on stderr (WARNING and up, INFO too with --verbose)."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    functions = logging.Filter(FUNCTIONS_LOGGER)
    for handler in logging.getLogger().handlers:
        handler.addFilter(lambda record: not functions.filter(record))


def parameter_overrides(values: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` texts as template parameter overrides (BadParameter for any other)."""
    overrides: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"{text!r}: give a template parameter as KEY=VALUE")
        overrides[key.strip()] = value
    return overrides


def write_local_profile(stack: object) -> Path | None:
    """Write the stack's endpoint, keys and Spark data source options as the ``local``
    profile (``cirrusmq.spark.options_from_profile("local")`` reads the latter); None if
    that failed."""
    from ..config import LOCAL_PROFILE, ConfigError, save_profile

    credentials = stack.credentials  # type: ignore[attr-defined]
    values = {
        "endpoint": stack.endpoint,  # type: ignore[attr-defined]
        "access_key": credentials.access_key,
        "secret_key": credentials.secret_key,
    }
    spark_options = stack.spark_options()  # type: ignore[attr-defined]
    try:
        return save_profile(LOCAL_PROFILE, values, spark_options=spark_options)
    except (OSError, ConfigError) as exc:
        typer.echo(f"warning: could not write the 'local' profile: {exc}", err=True)
        return None


def _print_summary(stack: object, profile_path: Path | None = None) -> None:
    from cirrusmq_local import LocalStack

    assert isinstance(stack, LocalStack)
    if profile_path is not None:
        profile = [
            f"  profile       'local' in {profile_path}: in another terminal, "
            "`cirrusmq topic list` (or any command) uses this stack",
            "                (CIRRUSMQ_* variables or a 'default' profile take precedence)",
            "  spark         .options(**cirrusmq.spark.options_from_profile('local')) reads this "
            "stack",
        ]
    else:
        profile = ["  profile       not written: pass --endpoint and the keys to the CLI"]
    cli = Path(sys.executable).parent / "cirrusmq"
    lines = [
        f"CirrusMQ local stack ({stack.template_path})",
        f"  HTTP API      {stack.endpoint}",
        f"  console       {stack.endpoint}/console/   (sign in with the access key below)",
        f"  AWS (moto)    {stack.aws_endpoint}   region us-east-1, any access key",
        f"  access key    {stack.credentials.access_key}",
        f"  secret key    {stack.credentials.secret_key}",
        *profile,
        f"  cli           {cli} (or `source {cli.parent}/activate`, then `cirrusmq ...`)",
        (
            f"  data          kept in {stack.data_dir} (survives restarts; --ephemeral: memory "
            "only)"
            if stack.data_dir is not None
            else "  data          in memory only: topics and messages are gone when this stops"
        ),
        f"  metrics       {stack.endpoint}/local/metrics and /local/logs: what the functions "
        "emit (docs/operations.md); their logs: errors here, all with --verbose",
        "  resources",
        *(f"    {logical:<18} {physical}" for logical, physical in stack.resources.items()),
        "Press Ctrl-C to stop.",
    ]
    typer.echo("\n".join(lines), nl=True)
    sys.stdout.flush()
