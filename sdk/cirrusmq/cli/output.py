"""What the CLI prints: the consoles, tables fitted to the terminal, JSON, times, messages."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console

from ..message import MessageView
from .tables import Field, fitted

__all__ = [
    "AsJson",
    "Yes",
    "err",
    "iso",
    "out",
    "print_json",
    "print_message",
    "print_table",
    "when",
]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


def when(ms: int) -> str:
    """``ms`` since the epoch as ``YYYY-MM-DD HH:MM:SS UTC``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(ms: int | None) -> str:
    """``ms`` since the epoch as ISO 8601 with milliseconds."""
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).isoformat(timespec="milliseconds")


def print_json(value: Any) -> None:
    out.print_json(json.dumps(value))


def print_table(fields: Sequence[Field], rows: Sequence[Sequence[str]]) -> None:
    """A table fitted to the terminal (ids whole, long text cut: :mod:`cirrusmq.cli.tables`);
    what did not fit is named on stderr, with the ``--json`` hint."""
    result = fitted(fields, rows, out.width)
    out.print(result.table, markup=False)
    note = result.note()
    if note:
        err.print(note, markup=False)


def print_message(m: MessageView, *, as_json: bool) -> None:
    """One received message: a line of text, or one JSON object per line."""
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "message_id": m.message_id,
                    "topic": m.topic,
                    "queue": m.queue,
                    "offset": m.offset,
                    "tag": m.tag,
                    "keys": list(m.keys),
                    "properties": dict(m.properties),
                    "message_group": m.message_group,
                    "delivery_attempt": m.delivery_attempt,
                    "born_timestamp": m.born_timestamp,
                    "body": m.text,
                }
            )
            + "\n"
        )
        sys.stdout.flush()
        return
    extras = [f"tag={m.tag}"] if m.tag else []
    extras += [f"keys={','.join(m.keys)}"] if m.keys else []
    extras += [f"group={m.message_group}"] if m.message_group else []
    extras += [f"attempt={m.delivery_attempt}"] if m.delivery_attempt > 1 else []
    head = f"{m.topic}[{m.queue}]@{m.offset} {m.message_id}"
    out.print(" ".join([head, *extras, m.text]), markup=False)
