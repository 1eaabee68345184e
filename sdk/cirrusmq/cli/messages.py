"""``cirrusmq message``: ``find`` a topic's messages by key; ``trace`` what happened to
one message, as a timeline."""

from __future__ import annotations

from typing import Annotated

import typer

from ..admin import TraceEvent
from .connection import Connection, connected
from .output import AsJson, SaveBodies, err, iso, out, print_json, print_table, show_message
from .tables import Field
from .times import parse_timestamp

app = typer.Typer(
    help="Find messages by key; follow one message (topics with trace on).",
    no_args_is_help=True,
)


@app.command("find")
@connected
def message_find(
    topic: Annotated[str, typer.Option("--topic", help="Topic name.")],
    key: Annotated[str, typer.Option("--key", help="A message key.")],
    connection: Connection,
    begin: Annotated[
        str | None, typer.Option(help="Stored at or after: ms since the epoch or ISO 8601.")
    ] = None,
    end: Annotated[
        str | None, typer.Option(help="Stored at or before: ms since the epoch or ISO 8601.")
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max", help="Stop after this many messages.")
    ] = None,
    as_json: AsJson = False,
    save_bodies: SaveBodies = None,
) -> None:
    """Print the messages of TOPIC whose keys include KEY, newest first (the whole
    retention unless --begin / --end narrow it), page by page as they are found."""
    window = {}
    for name, text in (("begin", begin), ("end", end)):
        try:
            window[name] = parse_timestamp(text) if text is not None else None
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint=f"--{name}") from exc
    count = unsaved = 0
    with connection.admin() as admin:
        for message in admin.find_by_key(topic, key, **window):
            if max_messages is not None and count >= max_messages:
                break
            unsaved += not show_message(message, as_json=as_json, save_dir=save_bodies)
            count += 1
    if not as_json:
        err.print(f"{count} message(s) with key {key} in topic {topic}", markup=False)
    if unsaved:
        raise typer.Exit(1)


@app.command("trace")
@connected
def message_trace(
    topic: Annotated[str, typer.Argument(help="Topic name.")],
    message_id: Annotated[str, typer.Argument(help="The message id.")],
    connection: Connection,
    as_json: AsJson = False,
) -> None:
    """Print a message's trace events in time order (sent, delivered, acked, ...)."""
    with connection.admin() as admin:
        events = admin.trace_message(topic, message_id)
    if as_json:
        print_json([vars(e) for e in events])
        return
    fields = [Field("time", "id"), Field("event", "id"), Field("details", "text")]
    print_table(fields, [[iso(e.time), e.kind, details(e)] for e in events])
    out.print(f"{len(events)} event(s) of message {message_id} in topic {topic}", markup=False)


def details(event: TraceEvent) -> str:
    """The fields of an event that apply, as ``name=value`` pairs."""
    parts: list[str] = []
    if event.queue is not None:
        place = f"queue={event.queue}"
        parts.append(place if event.offset is None else f"{place} offset={event.offset}")
    for name in ("group", "client_id", "producer_id", "attempt", "target_topic", "reason"):
        value = getattr(event, name)
        if value is not None:
            parts.append(f"{name}={value}")
    if event.transaction_id:
        parts.append(f"transaction={event.transaction_id}")
    if event.invisible_until is not None:
        parts.append(f"invisible_until={iso(event.invisible_until)}")
    if event.delivery_timestamp is not None:
        parts.append(f"due={iso(event.delivery_timestamp)}")
    return " ".join(parts)
