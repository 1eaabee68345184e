"""CLI of retries and dead letters (issue 9): ``group update``, ``dlq list|show|redrive|purge``."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

import typer

from .commands import (
    AccessKey,
    AsJson,
    Endpoint,
    Profile,
    SecretKey,
    _admin,
    _print_json,
    out,
    print_table,
)
from .tables import Field

dlq_app = typer.Typer(
    help="List, show, redrive and purge a consumer group's dead letters.", no_args_is_help=True
)
Group = Annotated[str, typer.Argument(help="Consumer group.")]


def register(app: typer.Typer, group_app: typer.Typer) -> None:
    app.add_typer(dlq_app, name="dlq")
    group_app.command("update")(group_update)


def group_update(
    group: Group,
    max_delivery_attempts: Annotated[
        int,
        typer.Option(
            "--max-delivery-attempts",
            min=1,
            max=1000,
            help="Deliveries before a message becomes a dead letter (default 16).",
        ),
    ],
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Change a consumer group's settings."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        value = admin.update_group(group, max_delivery_attempts=max_delivery_attempts)
    out.print(f"group {group}: max delivery attempts {value}", markup=False)


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


@dlq_app.command("list")
def dlq_list(
    group: Group,
    topic: Annotated[str | None, typer.Option(help="Only dead letters of this topic.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 100,
    start: Annotated[int, typer.Option(min=0, help="DLQ offset to start at.")] = 0,
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """List a group's dead letters: id, origin, attempts, reason, stored time, preview."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        page = admin.list_dead_letters(group, topic, limit=limit, start=start)
    rows = [_row(d) for d in page.dead_letters]
    if as_json:
        _print_json({"dead_letters": rows, "next_start": page.next_start})
        return
    print_table(FIELDS, [_table_row(d) for d in page.dead_letters])
    if page.next_start is not None:
        out.print(f"more: --start {page.next_start}", markup=False)


@dlq_app.command("show")
def dlq_show(
    group: Group,
    message_id: Annotated[str, typer.Argument(help="Message id of the dead letter.")],
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Show one dead letter (the first with this message id) as JSON."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        start: int | None = 0
        while start is not None:
            page = admin.list_dead_letters(group, limit=1000, start=start)
            for d in page.dead_letters:
                if d.message_id == message_id:
                    _print_json({**_row(d), "keys": list(d.keys), "tag": d.tag})
                    return
            start = page.next_start
    out.print(f"no dead letter {message_id} in group {group}", markup=False)
    raise typer.Exit(1)


@dlq_app.command("redrive")
def dlq_redrive(
    group: Group,
    topic: Annotated[str | None, typer.Option(help="Only dead letters of this topic.")] = None,
    message_id: Annotated[
        list[str] | None, typer.Option("--id", help="Only this message (repeatable).")
    ] = None,
    max_messages: Annotated[int | None, typer.Option(min=1)] = None,
    rate: Annotated[float | None, typer.Option(min=0.001, help="Messages per second.")] = None,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Send dead letters back to their topics (resumable: run again after a failure)."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        summary = admin.redrive_dead_letters(
            group, topic, message_ids=message_id, max_messages=max_messages, rate=rate
        )
    out.print(f"redriven {summary.redriven}, skipped {summary.skipped} (topic gone)", markup=False)


@dlq_app.command("purge")
def dlq_purge(
    group: Group,
    before: Annotated[int | None, typer.Option(min=0, help="Only below this DLQ offset.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Drop a group's dead letters from listings and redrive (they expire with retention)."""
    if not yes:
        which = f"below offset {before}" if before is not None else "all"
        typer.confirm(
            f"Purge the dead letters of group {group} ({which})? They cannot be redriven after.",
            abort=True,
        )
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        floor = admin.purge_dead_letters(group, before=before)
    out.print(f"dead letters below offset {floor} purged", markup=False)
