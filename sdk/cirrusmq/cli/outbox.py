"""``cirrusmq outbox list|retry|purge``: the batches a producer's outbox set aside after a
refusal."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from ..outbox import RefusedBatch, SqliteOutbox
from .connection import Connection, connected, reported_errors
from .output import AsJson, Yes, err, out, print_json, print_table, when
from .tables import Field

app = typer.Typer(
    help="List, retry or purge the messages a producer's outbox set aside after a refusal.",
    no_args_is_help=True,
)

OutboxPath = Annotated[
    Path,
    typer.Option(
        "--path", exists=True, dir_okay=False, help="The producer's outbox file (outbox_path)."
    ),
]
EntryIds = Annotated[
    list[int] | None,
    typer.Option("--id", help="Only this refused batch (repeatable; default: all)."),
]


def _refused_rows(refused: list[RefusedBatch]) -> list[dict[str, Any]]:
    return [
        {
            "id": r.entry_id,
            "topic": r.topic,
            "messages": len(r.message_ids),
            "producer_id": r.batch.producer_id,
            "sequence": r.batch.sequence,
            "code": r.refusal.code,
            "http_status": r.refusal.http_status,
            "message": r.refusal.message,
            "refused_ms": r.refusal.refused_ms,
        }
        for r in refused
    ]


@contextmanager
def _outbox(path: Path) -> Iterator[SqliteOutbox]:
    with reported_errors():
        store = SqliteOutbox(path)
        try:
            yield store
        finally:
            store.close()


@app.command("list")
def outbox_list(path: OutboxPath, as_json: AsJson = False) -> None:
    """List the batches the service refused for good, set aside in the outbox."""
    with _outbox(path) as store:
        refused = store.refused()
        stats = store.stats()
    if as_json:
        print_json(_refused_rows(refused))
        return
    fields = [
        Field("id"),
        Field("topic", "id"),
        Field("messages"),
        Field("code"),
        Field("refused", optional=True),
        Field("message", "text"),
    ]
    rows = [
        [
            str(row["id"]),
            row["topic"],
            str(row["messages"]),
            row["code"] or str(row["http_status"]),
            when(row["refused_ms"]),
            row["message"],
        ]
        for row in _refused_rows(refused)
    ]
    print_table(fields, rows)
    out.print(
        f"{stats.refused_messages} refused message(s) in {stats.refused_batches} batch(es); "
        f"{stats.messages} message(s) waiting to be sent"
    )


@app.command("retry")
@connected
def outbox_retry(
    path: OutboxPath,
    connection: Connection,
    ids: EntryIds = None,
    send_now: Annotated[
        bool,
        typer.Option(
            "--send/--no-send",
            help="Send them now (needs an endpoint), or only put them back in line for the "
            "next producer on this outbox.",
        ),
    ] = True,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the sends.")] = 60.0,
) -> None:
    """Put refused batches back in line, unchanged (same producer id, sequence, message ids),
    and send them (with everything else waiting in the outbox)."""
    if not send_now:
        with _outbox(path) as store:
            moved = store.retry_refused(ids)
        count = sum(len(r.message_ids) for r in moved)
        out.print(f"{count} message(s) put back in line in {path}")
        return
    with connection.producer(outbox_path=path) as producer:
        count = producer.retry_refused(ids)
        try:
            producer.flush(timeout_s=timeout)
        except TimeoutError:
            err.print(f"[yellow]not everything was sent within {timeout} s[/yellow]")
    with _outbox(path) as store:  # the producer is closed: its outbox is free again
        stats, refused = store.stats(), store.refused()
    out.print(
        f"retried {count} message(s); {stats.messages} still waiting, "
        f"{stats.refused_messages} refused"
    )
    if refused:
        first = refused[0].refusal
        err.print(f"[red]refused:[/red] [{first.code}] {escape(first.message)}")
        raise typer.Exit(1)


@app.command("purge")
def outbox_purge(path: OutboxPath, ids: EntryIds = None, yes: Yes = False) -> None:
    """Delete refused batches from the outbox for good."""
    if not yes:
        which = "the refused batches " + ", ".join(map(str, ids)) if ids else "every refused batch"
        typer.confirm(f"Delete {which} from {path}?", abort=True)
    with _outbox(path) as store:
        purged = store.purge_refused(ids)
    count = sum(len(r.message_ids) for r in purged)
    out.print(f"purged {count} message(s) in {len(purged)} batch(es)")
