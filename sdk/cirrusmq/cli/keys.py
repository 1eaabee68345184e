"""``cirrusmq key create|bootstrap|list|disable|enable|delete`` (admin keys only)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..admin import AccessKey as KeyInfo
from ..admin import Permissions, SubscribeGrant
from .connection import Connection, connected
from .output import AsJson, Yes, err, out, print_json, print_table, when
from .tables import Field

app = typer.Typer(
    help="Create, list, disable, enable and delete access keys (admin keys only).",
    no_args_is_help=True,
)

KeyId = Annotated[str, typer.Argument(help="The access key id (CMQ...).", show_default=False)]

_STORE_IT = (
    "[bold yellow]This is the only time the secret key is shown: store it now[/bold yellow]"
    " (e.g. as access_key / secret_key of a profile in ~/.cirrusmq/config)."
)


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


@app.command("create")
@connected
def key_create(
    connection: Connection,
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
    with connection.admin() as admin:
        key = admin.create_access_key(permissions, description)
    if as_json:
        print_json({**_key_row(key), "secret_key": key.secret_key})
    else:
        out.print(f"created access key {key.access_key} ({key.status})", markup=False)
        out.print(f"  permissions  {key.permissions}", markup=False)
        if key.description:
            out.print(f"  description  {key.description}", markup=False)
        out.print(f"  access key   {key.access_key}", markup=False)
        out.print(f"  secret key   {key.secret_key}", markup=False)
    err.print(_STORE_IT)


@app.command("bootstrap")
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
    from ..admin.bootstrap import BootstrapError, bootstrap_admin_key

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
    err.print(_STORE_IT)


@app.command("list")
@connected
def key_list(connection: Connection, as_json: AsJson = False) -> None:
    """List the access keys (never their secrets)."""
    with connection.admin() as admin:
        keys = admin.list_access_keys()
    if as_json:
        print_json([_key_row(k) for k in keys])
        return
    fields = [
        Field("access key", "id"),
        Field("status"),
        Field("permissions", "text"),
        Field("description", "text", optional=True),
        Field("created", optional=True),
    ]
    rows = [
        [k.access_key, k.status, str(k.permissions), k.description, when(k.created_timestamp)]
        for k in keys
    ]
    print_table(fields, rows)
    out.print(f"{len(keys)} key(s)")


@app.command("disable")
@connected
def key_disable(key_id: KeyId, connection: Connection) -> None:
    """Disable an access key (its requests are refused within 60 s)."""
    _set_key_enabled(connection, key_id, False)


@app.command("enable")
@connected
def key_enable(key_id: KeyId, connection: Connection) -> None:
    """Enable a disabled access key again."""
    _set_key_enabled(connection, key_id, True)


def _set_key_enabled(connection: Connection, key_id: str, enabled: bool) -> None:
    with connection.admin() as admin:
        key = admin.enable_access_key(key_id) if enabled else admin.disable_access_key(key_id)
    out.print(f"access key {key.access_key} is {key.status}", markup=False)


@app.command("delete")
@connected
def key_delete(key_id: KeyId, connection: Connection, yes: Yes = False) -> None:
    """Delete an access key for good."""
    if not yes:
        typer.confirm(f"Delete access key {key_id} for good?", abort=True)
    with connection.admin() as admin:
        admin.delete_access_key(key_id)
    out.print(f"deleted access key {key_id}", markup=False)
