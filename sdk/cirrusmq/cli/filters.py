"""The ``--filter`` (tags) and ``--sql`` (SQL92) options the consuming commands share."""

from __future__ import annotations

from typing import Annotated

import typer

from ..message import FilterExpression

__all__ = ["SqlOption", "TagOption", "chosen_filter"]

TagOption = Annotated[str, typer.Option("--filter", help="Tag filter: '*' or 'TagA || TagB'.")]
SqlOption = Annotated[
    str | None,
    typer.Option(
        "--sql",
        help="SQL92 filter on the message's properties instead of tags, e.g. "
        "\"a > 5 AND region IN ('eu', 'us')\" (TAGS is the tag).",
    ),
]


def chosen_filter(tags: str, sql: str | None) -> FilterExpression:
    """The filter the options name (a usage error for both, or for a malformed one)."""
    if sql is not None and tags != "*":
        raise typer.BadParameter("give --filter (tags) or --sql, not both", param_hint="--sql")
    try:
        return FilterExpression(tags) if sql is None else FilterExpression.sql(sql)
    except ValueError as exc:
        hint = "--filter" if sql is None else "--sql"
        raise typer.BadParameter(str(exc), param_hint=hint) from exc
