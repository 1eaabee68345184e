"""``cirrusmq spark export|stats|replay``: the data pipeline jobs from the command line.

Data source options come from ``--options-profile NAME`` (the options stored with a profile:
``local`` for the stack ``cirrusmq dev`` runs), ``$CIRRUSMQ_SPARK_OPTIONS`` (JSON),
``--options-file`` (JSON) and ``-o KEY=VALUE`` (repeatable), later ones winning.
``replay`` sends through the API with the CLI's usual endpoint and keys. pyspark is
imported only when a command runs.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

spark_app = typer.Typer(
    help="Spark jobs on the stored batches: export, stats, replay (needs the spark extra).",
    no_args_is_help=True,
)

Options = Annotated[
    list[str] | None,
    typer.Option("--option", "-o", help="Data source option KEY=VALUE (repeatable)."),
]
OptionsFile = Annotated[
    str | None,
    typer.Option(help="JSON object of data source options (or $CIRRUSMQ_SPARK_OPTIONS)."),
]
Master = Annotated[str | None, typer.Option(help="Spark master, e.g. local[4].")]
OptionsProfile = Annotated[
    str | None,
    typer.Option(
        help="Start from the data source options stored with this profile ('local': the "
        "stack `cirrusmq dev` runs).",
        show_default=False,
    ),
]


def _session(app: str, master: str | None):  # type: ignore[no-untyped-def]
    try:
        from .jobs.common import session
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        typer.echo(f"the Spark jobs need the [spark] extra: pip install 'cirrusmq[spark]' ({exc})")
        raise typer.Exit(2) from exc
    return session(app, master or "local[*]")


def _options(
    option: list[str] | None, options_file: str | None, profile: str | None = None
) -> dict[str, str]:
    from ..config import ConfigError
    from . import options_from_profile
    from .jobs.common import load_options

    try:
        stored = options_from_profile(profile) if profile else {}
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--options-profile") from exc
    try:
        return {**stored, **load_options(option or (), options_file)}
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--option") from exc


@spark_app.command("export")
def export_command(
    topic: Annotated[str, typer.Option(help="Topic to export.")],
    output: Annotated[str, typer.Option(help="Dataset path (local, hdfs://, s3a://).")],
    starting_offsets: Annotated[str | None, typer.Option(help="earliest, latest or JSON.")] = None,
    ending_offsets: Annotated[str | None, typer.Option(help="earliest, latest or JSON.")] = None,
    starting_timestamp: Annotated[int | None, typer.Option(help="ms since the epoch.")] = None,
    ending_timestamp: Annotated[int | None, typer.Option(help="ms since the epoch.")] = None,
    option: Options = None,
    options_file: OptionsFile = None,
    options_profile: OptionsProfile = None,
    master: Master = None,
) -> None:
    """Export a topic's offsets or time range as Parquet partitioned by dt and tag
    (incremental and idempotent: offsets exported before are skipped)."""
    from .jobs.export import export

    options = _options(option, options_file, options_profile)
    result = export(
        _session("cirrusmq-export", master),
        options,
        topic,
        output,
        starting_offsets=starting_offsets,
        ending_offsets=ending_offsets,
        starting_timestamp=starting_timestamp,
        ending_timestamp=ending_timestamp,
    )
    if result.run is None:
        typer.echo("nothing new to export")
    else:
        typer.echo(
            f"exported {result.messages} messages in {result.files} files (run {result.run})"
        )


@spark_app.command("stats")
def stats_command(
    topic: Annotated[list[str], typer.Option(help="Topic (repeatable).")],
    output: Annotated[str, typer.Option(help="Where messages/, group_lag/, backlog/ go.")],
    group: Annotated[list[str] | None, typer.Option(help="Consumer group (repeatable).")] = None,
    option: Options = None,
    options_file: OptionsFile = None,
    options_profile: OptionsProfile = None,
    master: Master = None,
) -> None:
    """Messages and bytes per topic, queue, tag and hour; consumer-group lag snapshots."""
    from .jobs.stats import stats

    options = _options(option, options_file, options_profile)
    frames = stats(_session("cirrusmq-stats", master), options, topic, output, groups=group or [])
    for row in frames["group_lag"].collect():
        typer.echo(
            f"{row.group} {row.topic}[{row.queue}] committed {row.committed_offset} "
            f"max {row.max_offset} lag {row.lag}"
        )
    typer.echo(f"written under {output}")


@spark_app.command("replay")
def replay_command(
    ctx: typer.Context,
    source: Annotated[str, typer.Option(help="Parquet dataset (e.g. an export).")],
    topic: Annotated[str, typer.Option(help="Topic to publish into.")],
    rate: Annotated[
        float | None, typer.Option(help="Messages per second (default: no limit).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Messages per request.")] = 100,
    replay_id: Annotated[
        str | None, typer.Option(help="Names the replay (default: source).")
    ] = None,
    master: Master = None,
) -> None:
    """Publish a dataset back into a topic, rate-limited; re-running it stores nothing twice."""
    from ..cli.connection import Connection, reported_errors
    from .jobs.replay import replay

    with reported_errors():
        given = ctx.obj if isinstance(ctx.obj, Connection) else Connection()
        config = given.config()  # the connection options given before `spark`
        result = replay(
            _session("cirrusmq-replay", master),
            source,
            topic,
            endpoint=config.endpoint,
            credentials=config.credentials,
            replay_id=replay_id,
            rate=rate,
            batch_size=batch_size,
        )
    typer.echo(json.dumps(result.__dict__))
