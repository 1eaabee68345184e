"""``cirrusmq group list|describe|metrics|subscribe|update``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from ..admin import GroupDescription
from .connection import Connection, connected
from .filters import SqlOption, TagOption, chosen_filter
from .output import AsJson, out, print_json, print_table
from .tables import Field

app = typer.Typer(help="Inspect consumer groups, set subscriptions.", no_args_is_help=True)

Group = Annotated[str, typer.Argument(help="Consumer group.")]


@app.command("list")
@connected
def group_list(connection: Connection, as_json: AsJson = False) -> None:
    """List the consumer groups this key may see, with their topics."""
    with connection.admin() as admin:
        groups = admin.list_groups()
    if as_json:
        print_json([{"group": g.group, "topics": list(g.topics)} for g in groups])
        return
    print_table(
        [Field("group", "id"), Field("topics", "text")],
        [[g.group, ", ".join(g.topics) or "-"] for g in groups],
    )
    out.print(f"{len(groups)} group(s)")


@app.command("metrics")
@connected
def group_metrics(
    group: Group,
    connection: Connection,
    minutes: Annotated[int, typer.Option(min=1, max=360, help="The last N minutes.")] = 60,
    topic: Annotated[str | None, typer.Option(help="Only this topic.")] = None,
    as_json: AsJson = False,
) -> None:
    """Show a group's lag, oldest unacked age and in flight per minute (the emitted metrics)."""
    with connection.admin() as admin:
        metrics = admin.group_metrics(group, minutes=minutes, topic=topic)
    if as_json:
        print_json(
            {
                "group": metrics.group,
                "topics": [
                    {"topic": t.topic, "points": [vars(p) for p in t.points]}
                    for t in metrics.topics
                ],
                "dead_letters": [list(p) for p in metrics.dead_letters],
            }
        )
        return

    def value(v: float | None) -> str:
        return "-" if v is None else f"{v:g}"

    rows = [
        [
            datetime.fromtimestamp(p.timestamp / 1000, UTC).strftime("%Y-%m-%d %H:%M"),
            t.topic,
            value(p.lag),
            value(p.oldest_unacked_age_seconds),
            value(p.in_flight),
        ]
        for t in metrics.topics
        for p in t.points
    ]
    rows.sort()
    fields = [
        Field("minute (UTC)"),
        Field("topic", "id"),
        Field("lag"),
        Field("oldest unacked s", optional=True),
        Field("in flight"),
    ]
    print_table(fields, rows)
    dead = metrics.dead_letters[-1][1] if metrics.dead_letters else None
    out.print(f"group {metrics.group}: {len(rows)} point(s), dead letters {value(dead)}")


@app.command("describe")
@connected
def group_describe(
    group: Group,
    connection: Connection,
    topic: Annotated[str | None, typer.Option(help="Only this topic.")] = None,
    as_json: AsJson = False,
) -> None:
    """Show a consumer group's offsets, lag and in-flight messages per queue."""
    with connection.admin() as admin:
        description = admin.describe_group(group, topic)
    if as_json:
        print_json(
            {
                "group": description.group,
                "queues": [vars(q) for q in description.queues],
                "max_delivery_attempts": description.max_delivery_attempts,
                "consumers": [vars(c) for c in description.consumers],
                "subscriptions": [vars(s) for s in description.subscriptions],
            }
        )
        return
    fields = [
        Field("topic", "id"),
        Field("queue"),
        Field("committed"),
        Field("cursor", optional=True),
        Field("max offset"),
        Field("lag"),
        Field("in flight"),
        Field("oldest unacked", optional=True),
    ]
    rows = [
        [
            q.topic,
            str(q.queue),
            str(q.committed_offset),
            str(q.cursor),
            str(q.max_offset),
            str(q.lag),
            str(q.inflight),
            "-"
            if q.oldest_unacked_offset is None
            else f"{q.oldest_unacked_offset} (attempt {q.oldest_unacked_attempt})",
        ]
        for q in description.queues
    ]
    print_table(fields, rows)
    attempts = description.max_delivery_attempts
    out.print(
        f"group {description.group}: lag {description.lag}, in flight {description.inflight}"
        + ("" if attempts is None else f", max delivery attempts {attempts}")
    )
    _print_subscriptions(description)
    _print_consumers(description)


def _print_subscriptions(description: GroupDescription) -> None:
    """The filter the group records per topic, with its type (TAG or SQL92)."""
    if not description.subscriptions:
        return
    fields = [Field("topic", "id"), Field("type"), Field("filter", "text")]
    rows = [[s.topic, s.filter_type, s.filter] for s in description.subscriptions]
    print_table(fields, rows)


def _print_consumers(description: GroupDescription) -> None:
    """The group's live consumers (registered by their heartbeats) and their queues."""
    if not description.consumers:
        out.print("no live consumers")
        return
    rows = []
    for c in description.consumers:
        for topic, queues in sorted(c.queues.items()):
            shown = "all (shared)" if queues is None else ",".join(map(str, queues)) or "-"
            mode = "orderly" if c.orderly else "concurrent"
            expires = datetime.fromtimestamp(c.expires_at / 1000, UTC).strftime("%H:%M:%S")
            rows.append([c.client_id, mode, topic, shown, expires])
    fields = [
        Field("consumer", "id"),
        Field("mode"),
        Field("topic", "id"),
        Field("queues", "text"),
        Field("expires", optional=True),
    ]
    print_table(fields, rows)


@app.command("subscribe")
@connected
def group_subscribe(
    group: Group,
    topic: Annotated[str, typer.Option(help="Topic the group consumes.")],
    connection: Connection,
    filter_expression: TagOption = "*",
    sql: SqlOption = None,
) -> None:
    """Set the filter GROUP consumes TOPIC with (receives with another filter are refused)."""
    expression = chosen_filter(filter_expression, sql)
    with connection.admin() as admin:
        subscription = admin.subscribe(group, topic, expression)
    out.print(
        f"group {subscription.group} now consumes {subscription.topic} with filter "
        f"{subscription.filter_expression}",
        markup=False,
    )


@app.command("update")
@connected
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
    connection: Connection,
) -> None:
    """Change a consumer group's settings."""
    with connection.admin() as admin:
        value = admin.update_group(group, max_delivery_attempts=max_delivery_attempts)
    out.print(f"group {group}: max delivery attempts {value}", markup=False)
