"""``cirrusmq txn list|commit|rollback``: operators' view of undecided transactions."""

from __future__ import annotations

from typing import Annotated

import typer

from ..transaction import TransactionResolution
from .connection import Connection, connected
from .output import AsJson, Yes, out, print_json, print_table
from .tables import Field

app = typer.Typer(
    help="Operators: list a producer group's undecided transactions, end one by hand.",
    no_args_is_help=True,
)

ProducerGroup = Annotated[str, typer.Argument(help="Producer group.")]
TransactionId = Annotated[str, typer.Argument(help="Transaction id.")]


@app.command("list")
@connected
def txn_list(
    producer_group: ProducerGroup, connection: Connection, as_json: AsJson = False
) -> None:
    """List the group's open transactions: age, checks so far, topic, message count."""
    with connection.transaction_admin() as admin:
        found = admin.list_open(producer_group)
    if as_json:
        print_json([vars(t) for t in found])
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


def _resolve(
    connection: Connection,
    producer_group: str,
    transaction_id: str,
    resolution: TransactionResolution,
) -> None:
    with connection.transaction_admin() as admin:
        changed = admin.resolve(producer_group, transaction_id, resolution)
    verb = "committed" if resolution is TransactionResolution.COMMIT else "rolled back"
    out.print(f"{verb} transaction {transaction_id}" + ("" if changed else " (already)"))


@app.command("commit")
@connected
def txn_commit(
    producer_group: ProducerGroup, transaction_id: TransactionId, connection: Connection
) -> None:
    """Commit an undecided transaction by hand: its messages become visible."""
    _resolve(connection, producer_group, transaction_id, TransactionResolution.COMMIT)


@app.command("rollback")
@connected
def txn_rollback(
    producer_group: ProducerGroup,
    transaction_id: TransactionId,
    connection: Connection,
    yes: Yes = False,
) -> None:
    """Roll back an undecided transaction by hand: its messages are discarded."""
    if not yes:
        typer.confirm(
            f"Roll back transaction {transaction_id} of {producer_group} and discard its messages?",
            abort=True,
        )
    _resolve(connection, producer_group, transaction_id, TransactionResolution.ROLLBACK)
