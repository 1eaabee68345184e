"""``cirrusmq send`` (one message, or one per stdin line) and ``cirrusmq cancel-scheduled``.

``--delay`` / ``--deliver-at`` schedule the message (:func:`schedule_fields`): a delay equal to
one of RocketMQ's 18 levels is sent as that level, any other as a delivery time.
"""

from __future__ import annotations

import os
import re
import stat
import time
from concurrent.futures import Future, wait
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from ..large_body import INLINE_MAX_BYTES
from ..message import Message
from ..producer import Producer
from .connection import Connection, connected
from .output import Yes, err, iso, out
from .times import parse_timestamp

__all__ = [
    "cancel_scheduled",
    "count_lines",
    "file_body",
    "schedule_fields",
    "send",
    "send_lines",
]

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL_SECONDS = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800)
_LEVEL_SECONDS += (3600, 7200)


@connected
def send(
    topic: Annotated[str, typer.Argument(help="Topic to send to.")],
    connection: Connection,
    body: Annotated[
        str | None,
        typer.Option(help="Message body. Without it (or with '-'): one message per stdin line."),
    ] = None,
    body_file: Annotated[
        Path | None,
        typer.Option(
            "--body-file",
            exists=True,
            dir_okay=False,
            readable=True,
            help="Send this file's content as one message (above 4 MiB: streamed to S3 as a "
            "large body, up to 2 GiB).",
        ),
    ] = None,
    tag: Annotated[str | None, typer.Option(help="Tag of the message(s).")] = None,
    key: Annotated[list[str] | None, typer.Option(help="A key (repeatable).")] = None,
    group: Annotated[
        str | None, typer.Option(help="Message group (ordering / FIFO sharding key).")
    ] = None,
    prop: Annotated[
        list[str] | None,
        typer.Option("--property", "-p", help="A property NAME=VALUE (repeatable)."),
    ] = None,
    delay: Annotated[
        str | None,
        typer.Option(
            help="Deliver after this delay: 30s, 5m, 2h, 1d (a RocketMQ level's exact "
            "delay is sent as that level)."
        ),
    ] = None,
    deliver_at: Annotated[
        str | None,
        typer.Option(help="Deliver at this time: ISO 8601 (UTC if no zone) or ms since epoch."),
    ] = None,
) -> None:
    """Send a message, or one message per line of stdin (with a progress bar)."""
    schedule = schedule_fields(delay, deliver_at)
    if body is not None and body_file is not None:
        raise typer.BadParameter("use --body or --body-file, not both", param_hint="--body-file")
    properties = {}
    for item in prop or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--property")
        properties[name] = value

    def message(content: str | bytes | Path) -> Message:
        return Message(
            topic,
            content,
            tag=tag,
            keys=tuple(key or ()),
            properties=properties,
            message_group=group,
            **schedule,
        )

    with connection.producer() as producer:
        if body_file is not None or (body is not None and body != "-"):
            receipt = producer.send(message(file_body(body_file) if body_file else body))
            if receipt.scheduled:
                out.print(
                    f"scheduled {receipt.message_id} to {topic} queue {receipt.queue} "
                    f"at {receipt.delivery_timestamp} ({iso(receipt.delivery_timestamp)})"
                )
                return
            out.print(
                f"sent {receipt.message_id} to {topic} queue {receipt.queue} "
                f"offset {receipt.offset}"
            )
            return
        sent, failures = send_lines(producer, message)
    if failures:
        err.print(
            f"[red]{len(failures)} message(s) failed[/red], first: {escape(str(failures[0]))}"
        )
        raise typer.Exit(1)
    out.print(f"sent {sent} message(s) to {topic}")


def file_body(path: Path) -> bytes | Path:
    """A file's content as a message body: bytes when it fits inline, else the path (the
    producer streams it to S3 part by part, never holding it in memory)."""
    return path if path.stat().st_size > INLINE_MAX_BYTES else path.read_bytes()


def schedule_fields(delay: str | None, deliver_at: str | None) -> dict[str, int]:
    """Message fields for ``--delay`` / ``--deliver-at``."""
    if delay is not None and deliver_at is not None:
        raise typer.BadParameter("use --delay or --deliver-at, not both", param_hint="--delay")
    if delay is not None:
        match = _DURATION.match(delay.strip())
        if not match:
            raise typer.BadParameter(f"{delay!r}: use e.g. 30s, 5m, 2h, 1d", param_hint="--delay")
        ms = int(float(match[1]) * _UNIT_MS[match[2] or "s"])
        if ms % 1000 == 0 and ms // 1000 in _LEVEL_SECONDS:
            return {"delay_level": _LEVEL_SECONDS.index(ms // 1000) + 1}
        return {"delivery_timestamp": int(time.time() * 1000) + ms}
    if deliver_at is not None:
        try:
            return {"delivery_timestamp": parse_timestamp(deliver_at)}
        except ValueError:
            raise typer.BadParameter(
                f"{deliver_at!r}: use ISO 8601 or ms since the epoch", param_hint="--deliver-at"
            ) from None
    return {}


@connected
def cancel_scheduled(
    topic: Annotated[str, typer.Argument(help="Topic of the scheduled message.")],
    message_id: Annotated[str, typer.Argument(help="Its message id.")],
    at: Annotated[
        int, typer.Option("--at", help="Its due time in ms (the send receipt's delivery time).")
    ],
    connection: Connection,
    yes: Yes = False,
) -> None:
    """Cancel a scheduled (delayed) message before it is due: it is deleted, never delivered."""
    if not yes:
        typer.confirm(f"Cancel {message_id} on {topic} (due {iso(at)}) for good?", abort=True)
    with connection.producer() as producer:
        producer.cancel_scheduled(topic, message_id, at)
    out.print(f"cancelled {message_id} (due {iso(at)})")


def send_lines(
    producer: Producer, message: Any, stream: IO[str] | None = None
) -> tuple[int, list[BaseException]]:
    """Send one message per non-empty line of ``stream`` (stdin); ``(sent, failures)``.

    Every future is waited for, so each failure is counted. The progress bar has a total when
    the stream is a regular file (its lines are counted first); otherwise a spinner counts.
    """
    stream = stream if stream is not None else typer.get_text_stream("stdin")
    total = count_lines(stream)
    columns: list[Any] = [SpinnerColumn(), TextColumn("[progress.description]{task.description}")]
    if total is not None:
        columns += [BarColumn(), TextColumn("{task.completed}/{task.total} sent")]
    else:
        columns += [TextColumn("{task.completed} sent")]
    columns.append(TimeElapsedColumn())
    futures: list[Future[Any]] = []
    with Progress(*columns, console=err, transient=not err.is_terminal) as progress:
        task = progress.add_task(f"sending to {producer.endpoint}", total=total)

        def done(future: Future[Any]) -> None:
            if not future.cancelled() and future.exception() is None:
                progress.advance(task)

        for line in stream:
            text = line.rstrip("\r\n")
            if not text:
                continue  # a message body cannot be empty
            future = producer.send_async(message(text))
            future.add_done_callback(done)
            futures.append(future)
        producer.flush()
        wait(futures)  # flush() may return before the last futures (and callbacks) complete
        failures = [e for f in futures if (e := f.exception()) is not None]
        progress.update(task, completed=len(futures) - len(failures))
    return len(futures) - len(failures), failures


def count_lines(stream: IO[str]) -> int | None:
    """The non-empty lines left in ``stream`` if it is a regular file (then rewound to where it
    was), else ``None`` (a pipe or a terminal cannot be read twice)."""
    try:
        if not stream.seekable() or not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        position = stream.tell()
    except (OSError, ValueError, AttributeError):
        return None
    count = sum(1 for line in stream if line.rstrip("\r\n"))
    stream.seek(position)
    return count
