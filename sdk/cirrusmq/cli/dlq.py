"""``cirrusmq dlq list|show|redrive|purge``: a consumer group's dead letters."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer

from .connection import Connection, connected
from .output import AsJson, Yes, out, print_json, print_table
from .tables import Field

app = typer.Typer(
    help="List, show, redrive and purge a consumer group's dead letters.", no_args_is_help=True
)
Group = Annotated[str, typer.Argument(help="Consumer group.")]


def _row(d: Any) -> dict[str, Any]:
    return {
        "dlq_offset": d.dlq_offset,
        "message_id": d.message_id,
        "origin": f"{d.origin_topic}/{d.origin_queue}@{d.origin_offset}",
        "attempts": d.delivery_attempts,
        "reason": d.reason,
        "stored": dt.datetime.fromtimestamp(d.stored_timestamp / 1000, dt.UTC).isoformat(),
        "preview": d.body_preview[:60].decode("utf-8", "replace"),
        "redriven": d.redriven,
    }


FIELDS = [
    Field("offset"),
    Field("message id", "id"),
    Field("origin", "id", optional=True),
    Field("attempts"),
    Field("redriven", optional=True),
    Field("stored", optional=True),
    Field("reason", "text"),
    Field("preview", "text", optional=True),
]
"""``dlq list``'s columns: ids whole; the reason and preview cut to one line."""


def _table_row(d: Any) -> list[str]:
    return [
        str(d.dlq_offset),
        d.message_id,
        f"{d.origin_topic}/{d.origin_queue}@{d.origin_offset}",
        str(d.delivery_attempts),
        "yes" if d.redriven else "no",
        dt.datetime.fromtimestamp(d.stored_timestamp / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
        d.reason or "",
        d.body_preview[:60].decode("utf-8", "replace"),
    ]


@app.command("list")
@connected
def dlq_list(
    group: Group,
    topic: Annotated[str | None, typer.Option(help="Only dead letters of this topic.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
    start: Annotated[int, typer.Option(min=0, help="DLQ offset to start at.")] = 0,
    as_json: AsJson = False,
    *,
    connection: Connection,
) -> None:
    """List a group's dead letters: id, origin, attempts, reason, stored time, preview."""
    with connection.admin() as admin:
        page = admin.list_dead_letters(group, topic, limit=limit, start=start)
    rows = [_row(d) for d in page.dead_letters]
    if as_json:
        print_json({"dead_letters": rows, "next_start": page.next_start})
        return
    print_table(FIELDS, [_table_row(d) for d in page.dead_letters])
    if page.next_start is not None:
        out.print(f"more: --start {page.next_start}", markup=False)


@app.command("show")
@connected
def dlq_show(
    group: Group,
    message_id: Annotated[str, typer.Argument(help="Message id of the dead letter.")],
    *,
    connection: Connection,
) -> None:
    """Show one dead letter (the first with this message id) as JSON."""
    with connection.admin() as admin:
        start: int | None = 0
        while start is not None:
            page = admin.list_dead_letters(group, limit=1000, start=start)
            for d in page.dead_letters:
                if d.message_id == message_id:
                    print_json({**_row(d), "keys": list(d.keys), "tag": d.tag})
                    return
            start = page.next_start
    out.print(f"no dead letter {message_id} in group {group}", markup=False)
    raise typer.Exit(1)


@app.command("redrive")
@connected
def dlq_redrive(
    group: Group,
    topic: Annotated[str | None, typer.Option(help="Only dead letters of this topic.")] = None,
    message_id: Annotated[
        list[str] | None, typer.Option("--id", help="Only this message (repeatable).")
    ] = None,
    max_messages: Annotated[int | None, typer.Option(min=1)] = None,
    rate: Annotated[float | None, typer.Option(min=0.001, help="Messages per second.")] = None,
    *,
    connection: Connection,
) -> None:
    """Send dead letters back to the group only (resumable: run again after a failure)."""
    with connection.admin() as admin:
        summary = admin.redrive_dead_letters(
            group, topic, message_ids=message_id, max_messages=max_messages, rate=rate
        )
    out.print(f"redriven {summary.redriven}, skipped {summary.skipped} (topic gone)", markup=False)


@app.command("purge")
@connected
def dlq_purge(
    group: Group,
    before: Annotated[int | None, typer.Option(min=0, help="Only below this DLQ offset.")] = None,
    yes: Yes = False,
    *,
    connection: Connection,
) -> None:
    """Drop a group's dead letters from listings and redrive (they expire with retention)."""
    if not yes:
        which = f"below offset {before}" if before is not None else "all"
        typer.confirm(
            f"Purge the dead letters of group {group} ({which})? They cannot be redriven after.",
            abort=True,
        )
    with connection.admin() as admin:
        floor = admin.purge_dead_letters(group, before=before)
    out.print(f"dead letters below offset {floor} purged", markup=False)
