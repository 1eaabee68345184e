"""What the CLI prints: the consoles, tables fitted to the terminal, JSON, times, messages."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from ..errors import LargeBodyError
from ..large_body import LargeBody
from ..message import MessageView
from .tables import Field, fitted

__all__ = [
    "AsJson",
    "SaveBodies",
    "Yes",
    "err",
    "iso",
    "out",
    "print_json",
    "print_message",
    "show_message",
    "print_table",
    "save_body",
    "summary",
    "when",
]

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
SaveBodies = Annotated[
    Path | None,
    typer.Option(
        "--save-bodies",
        file_okay=False,
        help="Stream each large body (above 4 MiB) to DIR/<message id>, checked against its "
        "size and SHA-256.",
        metavar="DIR",
    ),
]


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


def summary(body: LargeBody) -> str:
    """A large body in one short line (it is never loaded to be printed)."""
    digest = f" sha256 {body.sha256[:16]}…" if body.sha256 else ""
    return f"[large body {body.size} B{digest}]"


def pointer(body: LargeBody | None) -> dict[str, Any] | None:
    """A large body's pointer fields for ``--json``."""
    if body is None:
        return None
    return {
        "key": body.key,
        "size": body.size,
        "sha256": body.sha256,
        "url": body.url,
        "bucket": body.bucket,
    }


def save_body(m: MessageView, directory: Path) -> Path | None:
    """Stream ``m``'s large body to ``directory/<message id>`` (None for an inline body).

    It is written to a ``.part`` file renamed when the stream's size and SHA-256 check
    passed, so a body that failed the check (``LargeBodyError``) leaves no file behind.
    """
    if m.large_body is None:
        return None
    name = Path(m.message_id).name
    if name != m.message_id or name in ("", ".", ".."):
        raise typer.BadParameter(f"message id {m.message_id!r} is not a file name")
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / name
    partial = directory / f"{name}.part"
    try:
        with m.body_stream() as stream, open(partial, "wb") as file:
            for chunk in stream:
                file.write(chunk)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
    return target


def print_message(m: MessageView, *, as_json: bool) -> None:
    """One received message: a line of text, or one JSON object per line. A large body is
    shown as its size and SHA-256 (:func:`summary`; ``--json``: ``body`` null and the
    ``large_body`` pointer), never read."""
    large = m.large_body
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
                    "body": None if large is not None else m.text,
                    "large_body": pointer(large),
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
    text = summary(large) if large is not None else m.text
    out.print(" ".join([head, *extras, text]), markup=False)


def show_message(m: MessageView, *, as_json: bool, save_dir: Path | None) -> bool:
    """Print ``m`` and, with ``save_dir``, save its large body (:func:`save_body`); False
    when the body could not be saved (the error is on stderr)."""
    print_message(m, as_json=as_json)
    if save_dir is None:
        return True
    try:
        saved = save_body(m, save_dir)
    except LargeBodyError as exc:
        err.print(f"not saved {m.message_id}: {exc.code}: {exc}", markup=False)
        return False
    if saved is not None:
        err.print(f"saved {saved}", markup=False)
    return True
