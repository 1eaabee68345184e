"""The template's resources created in the current AWS endpoint (in-process ``mock_aws``),
with the broker's settings for them: what unit tests, the model harness and benchmarks
build a :class:`~cirrusmq_broker.container.Broker` on."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import boto3
from cirrusmq_broker.settings import Settings

from cirrusmq_local.resolver import Resolver, resolve_parameters
from cirrusmq_local.resources import create_resources
from cirrusmq_local.template import load_template

REGION = "us-east-1"


def broker_settings(
    template_path: Path,
    receipt_secret: str = "",
    tables: Mapping[str, str] | None = None,
    *,
    leases_on_summary: bool = False,
) -> Settings:
    """Create every table, bucket and key of ``template_path`` and return the settings of the
    core broker on them (topics, index, groups, producers, heads, bucket, access keys,
    nonces). Delayed messages and transactions stay off unless ``tables`` maps their
    :class:`Settings` fields to template logical ids (``{"timers_table": "TimersTable"}``);
    ``leases_on_summary`` is the template's LeasesOnSummary."""
    template = load_template(template_path)
    names = create_resources(
        boto3.client("dynamodb", region_name=REGION),
        boto3.client("s3", region_name=REGION),
        template,
        Resolver(template, resolve_parameters(template)),
        kms=boto3.client("kms", region_name=REGION),
    )
    return Settings(
        topics_table=names["TopicsTable"],
        log_index_table=names["LogIndexTable"],
        groups_table=names["GroupsTable"],
        producers_table=names["ProducersTable"],
        queue_heads_table=names["QueueHeadsTable"],
        bucket=names["MessageBucket"],
        access_keys_table=names["AccessKeysTable"],
        nonces_table=names["NoncesTable"],
        secrets_key_id=names["AccessKeySecretsKey"],
        receipt_secret=receipt_secret,
        aws_region=REGION,
        leases_on_summary=leases_on_summary,
        **{field: names[logical_id] for field, logical_id in (tables or {}).items()},
    )
