"""``cirrusmq message trace``: what happened to one message, as a timeline."""

from __future__ import annotations

from typing import Annotated

import typer

from ..admin import TraceEvent
from .connection import Connection, connected
from .output import AsJson, iso, out, print_json, print_table
from .tables import Field

app = typer.Typer(help="Follow one message (topics with trace on).", no_args_is_help=True)


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
