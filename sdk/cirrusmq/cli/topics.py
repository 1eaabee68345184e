"""``cirrusmq topic create|update|list|describe|delete``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from .connection import Connection, connected
from .output import AsJson, Yes, out, print_json, print_table, when
from .tables import Field

app = typer.Typer(help="Create, update, list, describe and delete topics.", no_args_is_help=True)
Trace = Annotated[
    bool,
    typer.Option(
        "--trace/--no-trace",
        help="Record message trace events (cirrusmq message trace; one write per request).",
    ),
]


@app.command("create")
@connected
def topic_create(
    name: Annotated[str, typer.Argument(help="Topic name: letters, digits, '_' and '-'.")],
    connection: Connection,
    queues: Annotated[int, typer.Option(help="Number of queues (1-64).")] = 8,
    message_type: Annotated[
        str, typer.Option("--type", help="NORMAL, FIFO, DELAY or TRANSACTION.")
    ] = "NORMAL",
    retention_hours: Annotated[int, typer.Option(help="How long messages are kept.")] = 72,
    trace: Trace = False,
) -> None:
    """Create a topic."""
    with connection.admin() as admin:
        topic = admin.create_topic(
            name,
            queues=queues,
            message_type=message_type.upper(),
            retention_hours=retention_hours,
            trace=trace,
        )
    out.print(
        f"created topic {topic.name}: {topic.queues} queues, {topic.message_type}, "
        f"retention {topic.retention_hours} h{', traced' if topic.trace else ''}"
    )


@app.command("update")
@connected
def topic_update(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    connection: Connection,
    trace: Annotated[
        bool | None,
        typer.Option("--trace/--no-trace", help="Turn message trace on or off."),
    ] = None,
) -> None:
    """Change a topic (message trace on or off)."""
    with connection.admin() as admin:
        topic = admin.update_topic(name, trace=trace)
    out.print(f"topic {topic.name}: trace {'on' if topic.trace else 'off'}")


@app.command("list")
@connected
def topic_list(connection: Connection, as_json: AsJson = False) -> None:
    """List the topics."""
    with connection.admin() as admin:
        topics = admin.list_topics()
    if as_json:
        print_json([vars(t) for t in topics])
        return
    traced = any(t.trace for t in topics)  # the trace column only when a topic has it on
    fields = [
        Field("topic", "id"),
        Field("type"),
        Field("queues"),
        Field("retention"),
        *([Field("trace")] if traced else []),
        Field("created", optional=True),
    ]
    rows = [
        [
            t.name,
            t.message_type,
            str(t.queues),
            f"{t.retention_hours} h",
            *(["on" if t.trace else "off"] if traced else []),
            when(t.created_timestamp),
        ]
        for t in topics
    ]
    print_table(fields, rows)
    out.print(f"{len(topics)} topic(s)")


@app.command("describe")
@connected
def topic_describe(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    connection: Connection,
    as_json: AsJson = False,
) -> None:
    """Show a topic and the offsets of its queues."""
    with connection.admin() as admin:
        description = admin.describe_topic(name)
    topic = description.topic
    if as_json:
        print_json({**vars(topic), "queue_offsets": [vars(q) for q in description.queue_offsets]})
        return
    out.print(
        f"topic {topic.name}: {topic.message_type}, {topic.queues} queues, retention "
        f"{topic.retention_hours} h, trace {'on' if topic.trace else 'off'}, created "
        f"{when(topic.created_timestamp)}"
    )
    table = Table("queue", "min offset", "max offset", "messages")
    for q in description.queue_offsets:
        table.add_row(
            str(q.queue), str(q.min_offset), str(q.max_offset), str(q.max_offset - q.min_offset)
        )
    out.print(table)
    out.print(f"{description.message_count} message(s) retained")


@app.command("delete")
@connected
def topic_delete(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    connection: Connection,
    yes: Yes = False,
) -> None:
    """Delete a topic and (in the background) its messages."""
    if not yes:
        typer.confirm(f"Delete topic {name} and all its messages?", abort=True)
    with connection.admin() as admin:
        admin.delete_topic(name)
    out.print(f"deleted topic {name}")
