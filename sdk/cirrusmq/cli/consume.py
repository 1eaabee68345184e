"""``cirrusmq consume``: receive as a group, print, optionally ack."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from .connection import Connection, connected
from .filters import SqlOption, TagOption, chosen_filter
from .output import SaveBodies, err, show_message

__all__ = ["consume"]


@connected
def consume(
    group: Annotated[str, typer.Argument(help="Consumer group.")],
    topic: Annotated[str, typer.Argument(help="Topic to consume.")],
    connection: Connection,
    filter_expression: TagOption = "*",
    sql: SqlOption = None,
    ack: Annotated[
        bool, typer.Option("--ack", help="Ack what is printed (otherwise it comes back later).")
    ] = False,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep waiting for new messages (Ctrl-C stops).")
    ] = False,
    max_messages: Annotated[
        int | None, typer.Option("--max", help="Stop after this many messages.")
    ] = None,
    wait: Annotated[
        float | None,
        typer.Option(help="Long-poll seconds per receive (default 20 with --follow, else 1)."),
    ] = None,
    invisible: Annotated[
        int, typer.Option(help="Seconds a received message stays invisible to the group.")
    ] = 60,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    save_bodies: SaveBodies = None,
) -> None:
    """Receive messages as GROUP from TOPIC and print them (until none is left, or --follow)."""
    chosen = chosen_filter(filter_expression, sql)
    await_s = wait if wait is not None else (20 if follow else 1)
    received = unsaved = 0
    with connection.simple_consumer(group, {topic: chosen}, await_s) as c:
        try:
            while max_messages is None or received < max_messages:
                room = 32 if max_messages is None else min(32, max_messages - received)
                batch = c.receive(room, invisible)
                kept = [m for m in batch if show_message(m, as_json=as_json, save_dir=save_bodies)]
                unsaved += len(batch) - len(kept)
                if ack and kept:  # a body that could not be saved is not acked: it comes back
                    unacked = [r for r in c.ack_batch(kept) if not r.acked]
                    for r in unacked:
                        err.print(
                            f"[yellow]not acked[/yellow] {r.message_id}: "
                            f"{escape(str(r.code or r.status.value))}"
                        )
                received += len(batch)
                if not batch and not follow:
                    break
        except KeyboardInterrupt:
            pass
    err.print(f"{received} message(s){' acked' if ack else ''}")
    if unsaved:
        err.print(f"[red]{unsaved} large body(ies) not saved[/red]")
        raise typer.Exit(1)
