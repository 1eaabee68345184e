"""``cirrusmq offsets show|reset`` (a topic's offsets, a group's rewind) and ``cirrusmq read``
(one queue by offset, no group)."""

from __future__ import annotations

import json
import re
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from ..admin.offsets import ResetTarget
from ..message import MessageView
from ..wire import read_bool, read_int, read_list
from .connection import Connection, connected
from .filters import SqlOption, TagOption, chosen_filter
from .output import AsJson, SaveBodies, Yes, err, out, print_json, show_message
from .times import parse_timestamp

__all__ = ["app", "parse_reset_target", "parse_timestamp", "read"]

app = typer.Typer(
    help="Show a topic's queue offsets; reset (rewind) a consumer group's offsets.",
    no_args_is_help=True,
)

_QUEUE_OFFSET = re.compile(r"^(\d{1,6}):(\d{1,19})$")


def parse_reset_target(text: str) -> ResetTarget:
    """``earliest``, ``latest``, a timestamp, or ``queue:offset[,queue:offset...]``."""
    text = text.strip()
    if text in ("earliest", "latest"):
        return text
    parts = [part.strip() for part in text.split(",")]
    matches = [_QUEUE_OFFSET.fullmatch(part) for part in parts]
    if all(matches):
        return {int(m[1]): int(m[2]) for m in matches if m}
    if "," in text:
        raise ValueError(f"{text!r} is not queue:offset[,queue:offset...] (e.g. 0:120,3:0)")
    return parse_timestamp(text)


@app.command("show")
@connected
def offsets_show(
    topic: Annotated[str, typer.Argument(help="Topic name.")],
    timestamp: Annotated[
        str | None,
        typer.Option(help="Also the offset of the first message stored at/after this time."),
    ] = None,
    as_json: AsJson = False,
    *,
    connection: Connection,
) -> None:
    """Show the min and max offset of each queue of TOPIC (and the offset for a time)."""
    try:
        at = parse_timestamp(timestamp) if timestamp is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--timestamp") from exc
    with connection.admin() as admin:
        queues = admin.topic_offsets(topic, timestamp=at)
    if as_json:
        print_json({"topic": topic, "timestamp": at, "queues": [vars(q) for q in queues]})
        return
    columns = ["queue", "min offset", "max offset"] + (["offset at time"] if at else [])
    table = Table(*columns)
    for q in queues:
        row = [str(q.queue), str(q.min_offset), str(q.max_offset)]
        table.add_row(*row, *([str(q.timestamp_offset)] if at else []))
    out.print(table)


@app.command("reset")
@connected
def offsets_reset(
    group: Annotated[str, typer.Argument(help="Consumer group (clustering).")],
    topic: Annotated[str, typer.Argument(help="Topic.")],
    to: Annotated[
        str,
        typer.Option(
            "--to",
            help="earliest | latest | a time (ms since the epoch or ISO-8601) | "
            "queue:offset[,queue:offset...]",
        ),
    ],
    yes: Yes = False,
    as_json: AsJson = False,
    *,
    connection: Connection,
) -> None:
    """Move GROUP's offsets on TOPIC (rewind or skip); its in-flight messages are dropped."""
    try:
        target = parse_reset_target(to)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--to") from exc
    if not yes:
        typer.confirm(f"Reset the offsets of group {group} on {topic} to {to}?", abort=True)
    with connection.admin() as admin:
        result = admin.reset_offsets(group, topic, target)
    if as_json:
        print_json(
            {
                "group": result.group,
                "topic": result.topic,
                "to": result.to,
                "timestamp": result.timestamp,
                "queues": [vars(q) for q in result.queues],
                "note": result.note,
            }
        )
        return
    table = Table("queue", "offset", "was", "min", "max", "dropped leases", "note")
    for q in result.queues:
        note = "past retention: earliest" if q.truncated else ""
        table.add_row(
            str(q.queue),
            str(q.offset),
            str(q.previous_cursor),
            str(q.min_offset),
            str(q.max_offset),
            str(q.dropped_leases),
            note,
        )
    out.print(table)
    if result.note:
        err.print(f"[yellow]note:[/yellow] {result.note}")


@connected
def read(
    topic: Annotated[str, typer.Argument(help="Topic to read.")],
    queue: Annotated[int, typer.Option(help="Queue number.")] = 0,
    offset: Annotated[int, typer.Option(help="First offset to read.")] = 0,
    max_messages: Annotated[int, typer.Option("--max", help="At most this many (1-1000).")] = 32,
    filter_expression: TagOption = "*",
    sql: SqlOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    save_bodies: SaveBodies = None,
    *,
    connection: Connection,
) -> None:
    """Read messages of one queue by offset (no consumer group; nothing is acked)."""
    expression = chosen_filter(filter_expression, sql)
    with connection.transport() as transport:
        body: Any = transport.request(
            "GET",
            f"/v1/topics/{topic}/queues/{queue}/messages",
            params={
                "offset": str(offset),
                "max_messages": str(max_messages),
                **expression.wire,
            },
        )
    shown = [
        show_message(MessageView.from_wire(m), as_json=as_json, save_dir=save_bodies)
        for m in read_list(body, "messages")
    ]
    start, following = read_int(body, "start_offset"), read_int(body, "next_offset")
    if read_bool(body, "truncated", False):
        err.print(f"[yellow]note:[/yellow] offsets {offset}-{start - 1} are past retention")
    summary = {"next_offset": following, "max_offset": read_int(body, "max_offset")}
    if as_json:
        sys.stderr.write(json.dumps(summary) + "\n")
    else:
        err.print(f"next offset {following} (queue end {summary['max_offset']})")
    if not all(shown):
        raise typer.Exit(1)
