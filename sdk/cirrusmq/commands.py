"""The client commands of the ``cirrusmq`` CLI: topics, send, consume, groups, outbox, keys.

:func:`register` adds them to the application in :mod:`cirrusmq.cli`. Every command takes
``--endpoint``, ``--access-key``, ``--secret-key`` and ``--profile`` (see :mod:`cirrusmq.config`
for the order in which options, environment and profile file are consulted).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, wait
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from .admin import AccessKey as KeyInfo
from .admin import Admin, GroupDescription, Permissions, SubscribeGrant
from .config import ClientConfig, ConfigError, load_config
from .consumer import SimpleConsumer
from .errors import AuthenticationError, MQError, TransportError
from .message import FilterExpression, Message, MessageView
from .outbox import RefusedBatch, SqliteOutbox
from .producer import Producer
from .tables import Field, fitted
from .transaction import TransactionAdmin, TransactionResolution  # transactions (issue 10)

__all__ = ["register"]

topic_app = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
group_app = typer.Typer(help="Inspect consumer groups, set subscriptions.", no_args_is_help=True)
key_app = typer.Typer(
    help="Create, list, disable, enable and delete access keys (admin keys only).",
    no_args_is_help=True,
)
outbox_app = typer.Typer(
    help="List, retry or purge the messages a producer's outbox set aside after a refusal.",
    no_args_is_help=True,
)

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

Endpoint = Annotated[
    str | None,
    typer.Option(help="API base URL (env CIRRUSMQ_ENDPOINT).", show_default=False),
]
AccessKey = Annotated[
    str | None,
    typer.Option(help="Access key (env CIRRUSMQ_ACCESS_KEY).", show_default=False),
]
SecretKey = Annotated[
    str | None,
    typer.Option(help="Secret key (env CIRRUSMQ_SECRET_KEY).", show_default=False),
]
Profile = Annotated[
    str | None,
    typer.Option(
        help="Profile in ~/.cirrusmq/config (env CIRRUSMQ_PROFILE; default 'default').",
        show_default=False,
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
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


def register(app: typer.Typer) -> None:
    """Add the client commands to ``app``."""
    app.add_typer(topic_app, name="topic")
    app.add_typer(group_app, name="group")
    app.add_typer(outbox_app, name="outbox")
    app.add_typer(key_app, name="key")
    app.command("send")(send)
    app.command("cancel-scheduled")(cancel_scheduled)  # delayed messages (issue 9)
    app.command("consume")(consume)
    from . import dlq_commands  # retries (issue 9): group update, dlq ...

    dlq_commands.register(app, group_app)
    app.add_typer(txn_app, name="txn")  # transactions (issue 10)


_RESOLVED: ContextVar[ClientConfig | None] = ContextVar("cirrusmq_cli_config", default=None)
"""The configuration the running command resolved (for error messages)."""


@contextmanager
def _reported_errors() -> Iterator[None]:
    """Turn SDK and configuration errors into a one-line message and exit status 1."""
    token = _RESOLVED.set(None)
    try:
        yield
    except (MQError, ConfigError, RuntimeError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        if isinstance(exc, AuthenticationError) and exc.code == "MissingSignature":
            err.print(
                "no credentials? pass --access-key and --secret-key, set CIRRUSMQ_ACCESS_KEY and "
                "CIRRUSMQ_SECRET_KEY, or add them to a profile"
            )
        resolved = _RESOLVED.get()
        if isinstance(exc, TransportError) and resolved and resolved.endpoint_source:
            err.print(
                f"the endpoint {escape(resolved.endpoint)} comes from "
                f"{escape(resolved.endpoint_source)}",
                markup=True,
            )
        raise typer.Exit(1) from exc
    finally:
        _RESOLVED.reset(token)


@contextmanager
def _admin(
    endpoint: str | None, access_key: str | None, secret_key: str | None, profile: str | None
) -> Iterator[Admin]:
    """An Admin client from the resolved configuration, errors reported as the CLI does."""
    with _reported_errors():
        cfg = _config(endpoint, access_key, secret_key, profile)
        with Admin(cfg.endpoint, cfg.credentials) as admin:
            yield admin


GLOBAL_OPTIONS: dict[str, str | None] = {}
"""Connection options given before the command (``cirrusmq --endpoint URL topic list``), set
by :mod:`cirrusmq.cli`; the command's own options win over them."""


def _config(
    endpoint: str | None, access_key: str | None, secret_key: str | None, profile: str | None
) -> ClientConfig:
    given = GLOBAL_OPTIONS
    config = load_config(
        endpoint=endpoint or given.get("endpoint"),
        access_key=access_key or given.get("access_key"),
        secret_key=secret_key or given.get("secret_key"),
        profile=profile or given.get("profile"),
    )
    _RESOLVED.set(config)
    return config


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _print_json(value: Any) -> None:
    out.print_json(json.dumps(value))


def print_table(fields: Sequence[Field], rows: Sequence[Sequence[str]]) -> None:
    """A table fitted to the terminal (ids whole, long text cut: :mod:`cirrusmq.tables`);
    what did not fit is named on stderr, with the ``--json`` hint."""
    result = fitted(fields, rows, out.width)
    out.print(result.table, markup=False)
    note = result.note()
    if note:
        err.print(note, markup=False)


# ---------------------------------------------------------------------------- topics
@topic_app.command("create")
def topic_create(
    name: Annotated[str, typer.Argument(help="Topic name: letters, digits, '_' and '-'.")],
    queues: Annotated[int, typer.Option(help="Number of queues (1-64).")] = 8,
    message_type: Annotated[
        str, typer.Option("--type", help="NORMAL, FIFO, DELAY or TRANSACTION.")
    ] = "NORMAL",
    retention_hours: Annotated[int, typer.Option(help="How long messages are kept.")] = 72,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Create a topic."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        topic = admin.create_topic(
            name,
            queues=queues,
            message_type=message_type.upper(),
            retention_hours=retention_hours,
        )
    out.print(
        f"created topic {topic.name}: {topic.queues} queues, {topic.message_type}, "
        f"retention {topic.retention_hours} h"
    )


@topic_app.command("list")
def topic_list(
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """List the topics."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        topics = admin.list_topics()
    if as_json:
        _print_json([vars(t) for t in topics])
        return
    fields = [
        Field("topic", "id"),
        Field("type"),
        Field("queues"),
        Field("retention"),
        Field("created", optional=True),
    ]
    rows = [
        [
            t.name,
            t.message_type,
            str(t.queues),
            f"{t.retention_hours} h",
            _when(t.created_timestamp),
        ]
        for t in topics
    ]
    print_table(fields, rows)
    out.print(f"{len(topics)} topic(s)")


@topic_app.command("describe")
def topic_describe(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Show a topic and the offsets of its queues."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        description = admin.describe_topic(name)
    topic = description.topic
    if as_json:
        _print_json({**vars(topic), "queue_offsets": [vars(q) for q in description.queue_offsets]})
        return
    out.print(
        f"topic {topic.name}: {topic.message_type}, {topic.queues} queues, retention "
        f"{topic.retention_hours} h, created {_when(topic.created_timestamp)}"
    )
    table = Table("queue", "min offset", "max offset", "messages")
    for q in description.queue_offsets:
        table.add_row(
            str(q.queue), str(q.min_offset), str(q.max_offset), str(q.max_offset - q.min_offset)
        )
    out.print(table)
    out.print(f"{description.message_count} message(s) retained")


@topic_app.command("delete")
def topic_delete(
    name: Annotated[str, typer.Argument(help="Topic name.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Delete a topic and (in the background) its messages."""
    if not yes:
        typer.confirm(f"Delete topic {name} and all its messages?", abort=True)
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        admin.delete_topic(name)
    out.print(f"deleted topic {name}")


# ---------------------------------------------------------------------------- groups
@group_app.command("describe")
def group_describe(
    group: Annotated[str, typer.Argument(help="Consumer group.")],
    topic: Annotated[str | None, typer.Option(help="Only this topic.")] = None,
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Show a consumer group's offsets, lag and in-flight messages per queue."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        description = admin.describe_group(group, topic)
    if as_json:
        _print_json(
            {
                "group": description.group,
                "queues": [vars(q) for q in description.queues],
                "consumers": [vars(c) for c in description.consumers],
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
        ]
        for q in description.queues
    ]
    print_table(fields, rows)
    out.print(f"group {description.group}: lag {description.lag}, in flight {description.inflight}")
    _print_consumers(description)


def _print_consumers(description: GroupDescription) -> None:
    """The group's live consumers and their queues (issue 11)."""
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


@group_app.command("subscribe")
def group_subscribe(
    group: Annotated[str, typer.Argument(help="Consumer group.")],
    topic: Annotated[str, typer.Option(help="Topic the group consumes.")],
    filter_expression: Annotated[
        str, typer.Option("--filter", help="Tag filter: '*' or 'TagA || TagB'.")
    ] = "*",
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Set the filter GROUP consumes TOPIC with (receives with another filter are refused)."""
    try:
        expression = FilterExpression(filter_expression)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--filter") from exc
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        subscription = admin.subscribe(group, topic, expression)
    out.print(
        f"group {subscription.group} now consumes {subscription.topic} with filter "
        f"{subscription.filter}",
        markup=False,
    )


# ---------------------------------------------------------------------------- access keys
KeyId = Annotated[str, typer.Argument(help="The access key id (CMQ...).", show_default=False)]


def _key_row(key: KeyInfo) -> dict[str, Any]:
    return {
        "access_key": key.access_key,
        "status": key.status,
        "description": key.description,
        "permissions": key.permissions.to_wire(),
        "created_timestamp": key.created_timestamp,
    }


def parse_grant(text: str) -> SubscribeGrant:
    """``GROUP_PATTERN:TOPIC_PATTERN`` as a subscribe grant (``typer.BadParameter`` if not)."""
    group, sep, topic = text.partition(":")
    if not sep or not group or not topic:
        raise typer.BadParameter(
            f"{text!r} is not GROUP_PATTERN:TOPIC_PATTERN", param_hint="--subscribe"
        )
    return SubscribeGrant((group,), (topic,))


@key_app.command("create")
def key_create(
    admin_key: Annotated[
        bool, typer.Option("--admin", help="Allow everything (topics, keys, any topic/group).")
    ] = False,
    publish: Annotated[
        list[str] | None,
        typer.Option(
            "--publish", metavar="PATTERN", help="Topics it may send to: a name or a prefix*."
        ),
    ] = None,
    subscribe: Annotated[
        list[str] | None,
        typer.Option(
            "--subscribe",
            metavar="GROUP_PATTERN:TOPIC_PATTERN",
            help="Consume as the matching groups from the matching topics (repeatable).",
        ),
    ] = None,
    description: Annotated[str, typer.Option(help="What the key is for.")] = "",
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Create an access key and print its secret (shown this once only)."""
    permissions = Permissions(
        admin=admin_key,
        publish=tuple(publish or ()),
        subscribe=tuple(parse_grant(s) for s in subscribe or ()),
    )
    if permissions.empty:
        raise typer.BadParameter(
            "the key would allow nothing: give --admin, --publish or --subscribe",
            param_hint="--admin / --publish / --subscribe",
        )
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        key = admin.create_access_key(permissions, description)
    if as_json:
        _print_json({**_key_row(key), "secret_key": key.secret_key})
    else:
        out.print(f"created access key {key.access_key} ({key.status})", markup=False)
        out.print(f"  permissions  {key.permissions}", markup=False)
        if key.description:
            out.print(f"  description  {key.description}", markup=False)
        out.print(f"  access key   {key.access_key}", markup=False)
        out.print(f"  secret key   {key.secret_key}", markup=False)
    err.print(
        "[bold yellow]This is the only time the secret key is shown: store it now[/bold yellow]"
        " (e.g. as access_key / secret_key of a profile in ~/.cirrusmq/config)."
    )


@key_app.command("bootstrap")
def key_bootstrap(
    stack_name: Annotated[
        str | None, typer.Option(help="The deployed CloudFormation stack (from sam deploy).")
    ] = None,
    table: Annotated[
        str | None, typer.Option(help="AccessKeysTable name (without a stack).")
    ] = None,
    kms_key: Annotated[str | None, typer.Option(help="AccessKeySecretsKey id or ARN.")] = None,
    region: Annotated[str | None, typer.Option(help="AWS region (else boto3's default).")] = None,
    description: Annotated[str, typer.Option(help="What the key is for.")] = "bootstrap admin key",
) -> None:
    """Create the first admin key of a deployed stack with your AWS credentials (the API
    itself only takes signed requests). Needs `pip install 'cirrusmq[local]'`."""
    from .bootstrap import BootstrapError, bootstrap_admin_key

    try:
        credentials = bootstrap_admin_key(
            stack_name=stack_name,
            table=table,
            kms_key=kms_key,
            region=region,
            description=description,
        )
    except BootstrapError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    out.print(f"  access key   {credentials.access_key}", markup=False)
    out.print(f"  secret key   {credentials.secret_key}", markup=False)
    err.print(
        "[bold yellow]This is the only time the secret key is shown: store it now[/bold yellow]"
        " (e.g. as access_key / secret_key of a profile in ~/.cirrusmq/config)."
    )


@key_app.command("list")
def key_list(
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """List the access keys (never their secrets)."""
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        keys = admin.list_access_keys()
    if as_json:
        _print_json([_key_row(k) for k in keys])
        return
    fields = [
        Field("access key", "id"),
        Field("status"),
        Field("permissions", "text"),
        Field("description", "text", optional=True),
        Field("created", optional=True),
    ]
    rows = [
        [k.access_key, k.status, str(k.permissions), k.description, _when(k.created_timestamp)]
        for k in keys
    ]
    print_table(fields, rows)
    out.print(f"{len(keys)} key(s)")


@key_app.command("disable")
def key_disable(
    key_id: KeyId,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Disable an access key (its requests are refused within 60 s)."""
    _set_key_enabled(key_id, False, endpoint, access_key, secret_key, profile)


@key_app.command("enable")
def key_enable(
    key_id: KeyId,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Enable a disabled access key again."""
    _set_key_enabled(key_id, True, endpoint, access_key, secret_key, profile)


def _set_key_enabled(
    key_id: str,
    enabled: bool,
    endpoint: str | None,
    access_key: str | None,
    secret_key: str | None,
    profile: str | None,
) -> None:
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        key = admin.enable_access_key(key_id) if enabled else admin.disable_access_key(key_id)
    out.print(f"access key {key.access_key} is {key.status}", markup=False)


@key_app.command("delete")
def key_delete(
    key_id: KeyId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Delete an access key for good."""
    if not yes:
        typer.confirm(f"Delete access key {key_id} for good?", abort=True)
    with _admin(endpoint, access_key, secret_key, profile) as admin:
        admin.delete_access_key(key_id)
    out.print(f"deleted access key {key_id}", markup=False)


# ---------------------------------------------------------------------------- outbox
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
    with _reported_errors():
        store = SqliteOutbox(path)
        try:
            yield store
        finally:
            store.close()


@outbox_app.command("list")
def outbox_list(path: OutboxPath, as_json: AsJson = False) -> None:
    """List the batches the service refused for good, set aside in the outbox."""
    with _outbox(path) as store:
        refused = store.refused()
        stats = store.stats()
    if as_json:
        _print_json(_refused_rows(refused))
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
            _when(row["refused_ms"]),
            row["message"],
        ]
        for row in _refused_rows(refused)
    ]
    print_table(fields, rows)
    out.print(
        f"{stats.refused_messages} refused message(s) in {stats.refused_batches} batch(es); "
        f"{stats.messages} message(s) waiting to be sent"
    )


@outbox_app.command("retry")
def outbox_retry(
    path: OutboxPath,
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
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Put refused batches back in line, unchanged (same producer id, sequence, message ids),
    and send them (with everything else waiting in the outbox)."""
    if not send_now:
        with _outbox(path) as store:
            moved = store.retry_refused(ids)
        count = sum(len(r.message_ids) for r in moved)
        out.print(f"{count} message(s) put back in line in {path}")
        return
    with _reported_errors():
        cfg = _config(endpoint, access_key, secret_key, profile)
        with Producer(cfg.endpoint, cfg.credentials, outbox_path=path) as producer:
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


@outbox_app.command("purge")
def outbox_purge(
    path: OutboxPath,
    ids: EntryIds = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete refused batches from the outbox for good."""
    if not yes:
        which = "the refused batches " + ", ".join(map(str, ids)) if ids else "every refused batch"
        typer.confirm(f"Delete {which} from {path}?", abort=True)
    with _outbox(path) as store:
        purged = store.purge_refused(ids)
    count = sum(len(r.message_ids) for r in purged)
    out.print(f"purged {count} message(s) in {len(purged)} batch(es)")


# ---------------------------------------------------------------------------- send
def send(
    topic: Annotated[str, typer.Argument(help="Topic to send to.")],
    body: Annotated[
        str | None,
        typer.Option(help="Message body. Without it (or with '-'): one message per stdin line."),
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
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Send a message, or one message per line of stdin (with a progress bar)."""
    schedule = _schedule(delay, deliver_at)
    properties = {}
    for item in prop or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--property")
        properties[name] = value

    def message(text: str) -> Message:
        return Message(
            topic,
            text,
            tag=tag,
            keys=tuple(key or ()),
            properties=properties,
            message_group=group,
            **schedule,
        )

    with _reported_errors():
        cfg = _config(endpoint, access_key, secret_key, profile)
        with Producer(cfg.endpoint, cfg.credentials) as producer:
            if body is not None and body != "-":
                receipt = producer.send(message(body))
                if receipt.scheduled:
                    out.print(
                        f"scheduled {receipt.message_id} to {topic} queue {receipt.queue} "
                        f"at {receipt.delivery_timestamp} ({_iso(receipt.delivery_timestamp)})"
                    )
                    return
                out.print(
                    f"sent {receipt.message_id} to {topic} queue {receipt.queue} "
                    f"offset {receipt.offset}"
                )
                return
            sent, failures = _send_lines(producer, message)
    if failures:
        err.print(
            f"[red]{len(failures)} message(s) failed[/red], first: {escape(str(failures[0]))}"
        )
        raise typer.Exit(1)
    out.print(f"sent {sent} message(s) to {topic}")


# ---------------------------------------------------------- delayed messages (issue 9)
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL_SECONDS = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800)
_LEVEL_SECONDS += (3600, 7200)


def _schedule(delay: str | None, deliver_at: str | None) -> dict[str, int]:
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
        text = deliver_at.strip()
        if re.fullmatch(r"[0-9]+", text):
            return {"delivery_timestamp": int(text)}
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise typer.BadParameter(
                f"{deliver_at!r}: use ISO 8601 or ms since the epoch", param_hint="--deliver-at"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return {"delivery_timestamp": int(moment.timestamp() * 1000)}
    return {}


def _iso(ms: int | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).isoformat(timespec="milliseconds")


def cancel_scheduled(
    topic: Annotated[str, typer.Argument(help="Topic of the scheduled message.")],
    message_id: Annotated[str, typer.Argument(help="Its message id.")],
    at: Annotated[
        int, typer.Option("--at", help="Its due time in ms (the send receipt's delivery time).")
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Cancel a scheduled (delayed) message before it is due: it is deleted, never delivered."""
    if not yes:
        typer.confirm(f"Cancel {message_id} on {topic} (due {_iso(at)}) for good?", abort=True)
    with _reported_errors():
        cfg = _config(endpoint, access_key, secret_key, profile)
        with Producer(cfg.endpoint, cfg.credentials) as producer:
            producer.cancel_scheduled(topic, message_id, at)
    out.print(f"cancelled {message_id} (due {_iso(at)})")


def _send_lines(
    producer: Producer, message: Any, stream: IO[str] | None = None
) -> tuple[int, list[BaseException]]:
    """Send one message per non-empty line of ``stream`` (stdin); ``(sent, failures)``.

    Every future is waited for, so each failure is counted. The progress bar has a total when
    the stream is a regular file (its lines are counted first); otherwise a spinner counts.
    """
    stream = stream if stream is not None else typer.get_text_stream("stdin")
    total = _count_lines(stream)
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


def _count_lines(stream: IO[str]) -> int | None:
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


# ---------------------------------------------------------------------------- consume
def consume(
    group: Annotated[str, typer.Argument(help="Consumer group.")],
    topic: Annotated[str, typer.Argument(help="Topic to consume.")],
    filter_expression: Annotated[
        str, typer.Option("--filter", help="Tag filter: '*' or 'TagA || TagB'.")
    ] = "*",
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
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Receive messages as GROUP from TOPIC and print them (until none is left, or --follow)."""
    await_s = wait if wait is not None else (20 if follow else 1)
    received = 0
    with _reported_errors():
        cfg = _config(endpoint, access_key, secret_key, profile)
        subscriptions = {topic: FilterExpression(filter_expression)}
        with SimpleConsumer(cfg.endpoint, cfg.credentials, group, subscriptions, await_s) as c:
            try:
                while max_messages is None or received < max_messages:
                    room = 32 if max_messages is None else min(32, max_messages - received)
                    batch = c.receive(room, invisible)
                    for m in batch:
                        _print_message(m, as_json=as_json)
                    if ack and batch:
                        unacked = [r for r in c.ack_batch(batch) if not r.acked]
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


def _print_message(m: MessageView, *, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(
            json.dumps(
                {
                    "message_id": m.message_id,
                    "topic": m.topic,
                    "queue": m.queue,
                    "offset": m.offset,
                    "tag": m.tag,
                    "keys": list(m.keys),
                    "properties": dict(m.properties),
                    "message_group": m.message_group,
                    "delivery_attempt": m.delivery_attempt,
                    "born_timestamp": m.born_timestamp,
                    "body": m.text,
                }
            )
            + "\n"
        )
        sys.stdout.flush()
        return
    extras = [f"tag={m.tag}"] if m.tag else []
    extras += [f"keys={','.join(m.keys)}"] if m.keys else []
    extras += [f"group={m.message_group}"] if m.message_group else []
    extras += [f"attempt={m.delivery_attempt}"] if m.delivery_attempt > 1 else []
    head = f"{m.topic}[{m.queue}]@{m.offset} {m.message_id}"
    out.print(" ".join([head, *extras, m.text]), markup=False)


# ------------------------------------------------------------ transactions (issue 10)
txn_app = typer.Typer(
    help="Operators: list a producer group's undecided transactions, end one by hand.",
    no_args_is_help=True,
)


@contextmanager
def _txn_admin(
    endpoint: str | None, access_key: str | None, secret_key: str | None, profile: str | None
) -> Iterator[TransactionAdmin]:
    with _reported_errors():
        cfg = _config(endpoint, access_key, secret_key, profile)
        with TransactionAdmin(cfg.endpoint, cfg.credentials) as admin:
            yield admin


@txn_app.command("list")
def txn_list(
    producer_group: Annotated[str, typer.Argument(help="Producer group.")],
    as_json: AsJson = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """List the group's open transactions: age, checks so far, topic, message count."""
    with _txn_admin(endpoint, access_key, secret_key, profile) as admin:
        found = admin.list_open(producer_group)
    if as_json:
        _print_json([vars(t) for t in found])
        return
    fields = [
        Field("transaction", "id"),
        Field("state"),
        Field("topic", "id"),
        Field("msgs"),
        Field("age s"),
        Field("checks"),
        Field("producer", "id", optional=True),
    ]
    rows = [
        [
            t.transaction_id,
            t.state,
            t.topic,
            str(t.message_count),
            f"{t.age_seconds:.0f}",
            f"{t.checks}/{t.max_checks}",
            t.transactional_id,
        ]
        for t in found
    ]
    print_table(fields, rows)
    out.print(f"{len(found)} open transaction(s) in producer group {producer_group}")


def _txn_resolve(
    producer_group: str,
    transaction_id: str,
    resolution: TransactionResolution,
    options: tuple[str | None, str | None, str | None, str | None],
) -> None:
    with _txn_admin(*options) as admin:
        changed = admin.resolve(producer_group, transaction_id, resolution)
    verb = "committed" if resolution is TransactionResolution.COMMIT else "rolled back"
    out.print(f"{verb} transaction {transaction_id}" + ("" if changed else " (already)"))


@txn_app.command("commit")
def txn_commit(
    producer_group: Annotated[str, typer.Argument(help="Producer group.")],
    transaction_id: Annotated[str, typer.Argument(help="Transaction id.")],
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Commit an undecided transaction by hand: its messages become visible."""
    options = (endpoint, access_key, secret_key, profile)
    _txn_resolve(producer_group, transaction_id, TransactionResolution.COMMIT, options)


@txn_app.command("rollback")
def txn_rollback(
    producer_group: Annotated[str, typer.Argument(help="Producer group.")],
    transaction_id: Annotated[str, typer.Argument(help="Transaction id.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    endpoint: Endpoint = None,
    access_key: AccessKey = None,
    secret_key: SecretKey = None,
    profile: Profile = None,
) -> None:
    """Roll back an undecided transaction by hand: its messages are discarded."""
    if not yes:
        typer.confirm(
            f"Roll back transaction {transaction_id} of {producer_group} and discard its messages?",
            abort=True,
        )
    options = (endpoint, access_key, secret_key, profile)
    _txn_resolve(producer_group, transaction_id, TransactionResolution.ROLLBACK, options)


# ------------------------------------------------------ end of transactions (issue 10)
