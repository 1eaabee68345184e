"""The ``cirrusmq`` command line."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

import typer

from .commands import register as register_client_commands

app = typer.Typer(help="CirrusMQ: a serverless message queue with RocketMQ semantics.")


@app.callback()
def _root() -> None:
    """CirrusMQ command line."""


register_client_commands(app)  # topic, group, send, consume (cirrusmq.commands)


@app.command()
def dev(
    host: str = typer.Option("127.0.0.1", help="Interface the HTTP API listens on."),
    port: int = typer.Option(8080, help="Port of the HTTP API (0 picks a free one)."),
    template: Path | None = typer.Option(
        None, exists=True, dir_okay=False, help="SAM template (default: the repo's template.yaml)."
    ),
    schedules: bool = typer.Option(True, help="Run the template's Schedule events on timers."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log every request."),
) -> None:
    """Run the whole backend locally (moto + the template's resources, routes and schedules)."""
    try:
        from cirrusmq_local import LocalStack, TemplateError
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        typer.echo(
            f"the local stack needs the [local] extra: pip install 'cirrusmq[local]' ({exc})"
        )
        raise typer.Exit(2) from exc
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    stack = LocalStack(template, host=host, port=port, schedules=schedules)
    try:
        try:
            stack.start()
        except (TemplateError, OSError, RuntimeError) as exc:
            typer.echo(f"cannot start the local stack: {exc}", err=True)
            raise typer.Exit(1) from exc
        _print_summary(stack)
        while not stop.wait(0.5):
            pass
        typer.echo("stopping...")
    finally:
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    typer.echo("stopped.")


def _print_summary(stack: object) -> None:
    from cirrusmq_local import LocalStack

    assert isinstance(stack, LocalStack)
    lines = [
        f"CirrusMQ local stack ({stack.template_path})",
        f"  HTTP API      {stack.endpoint}",
        f"  AWS (moto)    {stack.aws_endpoint}   region us-east-1, any access key",
        f"  access key    {stack.credentials.access_key}",
        f"  secret key    {stack.credentials.secret_key}",
        "  resources",
        *(f"    {logical:<18} {physical}" for logical, physical in stack.resources.items()),
        "Press Ctrl-C to stop.",
    ]
    typer.echo("\n".join(lines))


def main() -> None:
    """Entry point of the ``cirrusmq`` script."""
    app()


if __name__ == "__main__":
    main()
