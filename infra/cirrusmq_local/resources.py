"""Create the template's DynamoDB tables, S3 buckets and KMS keys in moto (CloudFormation → API
shapes)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cirrusmq_local.resolver import Resolver
from cirrusmq_local.template import KMS_KEY_TYPE, Bucket, Table, Template, TemplateError

__all__ = [
    "bucket_encryption_to_api",
    "create_buckets",
    "create_kms_keys",
    "create_resources",
    "create_tables",
    "lifecycle_rules_to_api",
    "table_to_api",
]

log = logging.getLogger(__name__)

_INDEX_KEYS = ("IndexName", "KeySchema", "Projection", "ProvisionedThroughput")
_TABLE_COPIED = ("SSESpecification", "TableClass", "DeletionProtectionEnabled", "Tags")
# Properties that are handled, or that have no meaning in an emulator.
_TABLE_HANDLED = {
    "AttributeDefinitions", "KeySchema", "GlobalSecondaryIndexes", "LocalSecondaryIndexes",
    "BillingMode", "ProvisionedThroughput", "TableName", "TimeToLiveSpecification",
    "StreamSpecification", "PointInTimeRecoverySpecification", "ContributorInsightsSpecification",
    *_TABLE_COPIED,
}  # fmt: skip
_BUCKET_HANDLED = {
    "BucketName", "BucketEncryption", "LifecycleConfiguration", "PublicAccessBlockConfiguration",
    "VersioningConfiguration", "Tags",
}  # fmt: skip


def _enabled(conditional: str | None, resolver: Resolver) -> bool:
    return conditional is None or resolver.condition(conditional)


# ------------------------------------------------------------------------------ tables
def table_to_api(table: Table, name: str, resolver: Resolver) -> dict[str, Any]:
    """``dynamodb.create_table`` keyword arguments for a template table."""
    props = resolver.resolve(dict(table.properties)) or {}
    billing = str(props.get("BillingMode", "PROVISIONED"))
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": props.get("AttributeDefinitions", []),
        "KeySchema": props["KeySchema"],
        "BillingMode": billing,
    }
    if billing == "PROVISIONED":
        kwargs["ProvisionedThroughput"] = _throughput(props.get("ProvisionedThroughput"))
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        indexes = []
        for index in props.get(key) or []:
            api_index = {k: index[k] for k in _INDEX_KEYS if k in index}
            if key == "LocalSecondaryIndexes":
                api_index.pop("ProvisionedThroughput", None)
            elif billing == "PROVISIONED":
                api_index["ProvisionedThroughput"] = _throughput(index.get("ProvisionedThroughput"))
            indexes.append(api_index)
        if indexes:
            kwargs[key] = indexes
    stream = props.get("StreamSpecification")
    if stream:
        kwargs["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": stream["StreamViewType"],
        }
    for key in _TABLE_COPIED:
        if key in props:
            kwargs[key] = props[key]
    for key in sorted(set(props) - _TABLE_HANDLED):
        log.info("table %s: property %s is not emulated locally", table.logical_id, key)
    return kwargs


def _throughput(value: Mapping[str, Any] | None) -> dict[str, int]:
    value = value or {}
    return {
        "ReadCapacityUnits": int(value.get("ReadCapacityUnits", 5)),
        "WriteCapacityUnits": int(value.get("WriteCapacityUnits", 5)),
    }


def create_tables(client: Any, template: Template, resolver: Resolver) -> dict[str, str]:
    """Create every table (keys, GSIs/LSIs, TTL, PITR); return logical id → table name."""
    names: dict[str, str] = {}
    for table in template.tables.values():
        if not _enabled(table.condition, resolver):
            continue
        name = resolver.physical_name(table.logical_id)
        names[table.logical_id] = name
        try:
            client.create_table(**table_to_api(table, name, resolver))
        except client.exceptions.ResourceInUseException:
            continue  # kept from the last run (a data dir): as it was created then
        if table.time_to_live is not None:
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={
                    "AttributeName": resolver.text(table.time_to_live.attribute_name),
                    "Enabled": table.time_to_live.enabled,
                },
            )
        pitr = resolver.resolve(table.properties.get("PointInTimeRecoverySpecification"))
        if pitr and str(pitr.get("PointInTimeRecoveryEnabled")).lower() == "true":
            client.update_continuous_backups(
                TableName=name,
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )
    return names


# ----------------------------------------------------------------------------- buckets
def _lifecycle_filter(rule: Mapping[str, Any]) -> dict[str, Any]:
    tags = [{"Key": tag["Key"], "Value": tag["Value"]} for tag in rule.get("TagFilters") or []]
    and_block: dict[str, Any] = {}
    if rule.get("Prefix") is not None:
        and_block["Prefix"] = rule["Prefix"]
    for key in ("ObjectSizeGreaterThan", "ObjectSizeLessThan"):
        if key in rule:
            and_block[key] = int(rule[key])
    if tags:
        and_block["Tags"] = tags
    if not and_block:
        return {"Prefix": ""}
    if len(and_block) == 1 and len(tags) <= 1:  # one condition: no "And"
        return {"Tag": tags[0]} if tags else dict(and_block)
    return {"And": and_block}


def _lifecycle_rule_to_api(rule: Mapping[str, Any]) -> dict[str, Any]:
    api: dict[str, Any] = {
        "Status": rule.get("Status", "Enabled"),
        "Filter": _lifecycle_filter(rule),
    }
    if "Id" in rule:
        api["ID"] = rule["Id"]
    expiration: dict[str, Any] = {}
    if "ExpirationInDays" in rule:
        expiration["Days"] = int(rule["ExpirationInDays"])
    if "ExpirationDate" in rule:
        expiration["Date"] = rule["ExpirationDate"]
    if "ExpiredObjectDeleteMarker" in rule:
        expiration["ExpiredObjectDeleteMarker"] = bool(rule["ExpiredObjectDeleteMarker"])
    if expiration:
        api["Expiration"] = expiration
    transitions = []
    for item in [
        *(rule.get("Transitions") or []),
        *([rule["Transition"]] if "Transition" in rule else []),
    ]:
        transition: dict[str, Any] = {"StorageClass": item["StorageClass"]}
        if "TransitionInDays" in item:
            transition["Days"] = int(item["TransitionInDays"])
        if "TransitionDate" in item:
            transition["Date"] = item["TransitionDate"]
        transitions.append(transition)
    if transitions:
        api["Transitions"] = transitions
    noncurrent_transitions = []
    for item in rule.get("NoncurrentVersionTransitions") or []:
        transition = {"StorageClass": item["StorageClass"]}
        if "TransitionInDays" in item:
            transition["NoncurrentDays"] = int(item["TransitionInDays"])
        if "NewerNoncurrentVersions" in item:
            transition["NewerNoncurrentVersions"] = int(item["NewerNoncurrentVersions"])
        noncurrent_transitions.append(transition)
    if noncurrent_transitions:
        api["NoncurrentVersionTransitions"] = noncurrent_transitions
    noncurrent: dict[str, Any] = {}
    if "NoncurrentVersionExpirationInDays" in rule:
        noncurrent["NoncurrentDays"] = int(rule["NoncurrentVersionExpirationInDays"])
    if "NoncurrentVersionExpiration" in rule:
        block = rule["NoncurrentVersionExpiration"]
        noncurrent["NoncurrentDays"] = int(block["NoncurrentDays"])
        if "NewerNoncurrentVersions" in block:
            noncurrent["NewerNoncurrentVersions"] = int(block["NewerNoncurrentVersions"])
    if noncurrent:
        api["NoncurrentVersionExpiration"] = noncurrent
    abort = rule.get("AbortIncompleteMultipartUpload")
    if abort:
        api["AbortIncompleteMultipartUpload"] = {
            "DaysAfterInitiation": int(abort["DaysAfterInitiation"])
        }
    return api


def lifecycle_rules_to_api(rules: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Translate CloudFormation ``LifecycleConfiguration.Rules`` to the S3 API's ``Rules``.

    ``ExpirationInDays`` → ``Expiration.Days``; ``Prefix``/``TagFilters``/object sizes →
    ``Filter`` (a single condition directly, several under ``Filter.And``).
    """
    return [_lifecycle_rule_to_api(rule) for rule in rules]


def bucket_encryption_to_api(encryption: Mapping[str, Any]) -> dict[str, Any]:
    """Translate CloudFormation ``BucketEncryption`` to ``ServerSideEncryptionConfiguration``."""
    rules = []
    for rule in encryption.get("ServerSideEncryptionConfiguration") or []:
        api_rule: dict[str, Any] = {}
        default = rule.get("ServerSideEncryptionByDefault")
        if default:
            api_rule["ApplyServerSideEncryptionByDefault"] = dict(default)
        if "BucketKeyEnabled" in rule:
            api_rule["BucketKeyEnabled"] = bool(rule["BucketKeyEnabled"])
        rules.append(api_rule)
    if not rules:
        raise TemplateError("BucketEncryption needs ServerSideEncryptionConfiguration")
    return {"Rules": rules}


def _configure_bucket(client: Any, bucket: Bucket, name: str, resolver: Resolver) -> None:
    props = resolver.resolve(dict(bucket.properties)) or {}
    if props.get("BucketEncryption"):
        client.put_bucket_encryption(
            Bucket=name,
            ServerSideEncryptionConfiguration=bucket_encryption_to_api(props["BucketEncryption"]),
        )
    if props.get("PublicAccessBlockConfiguration"):
        client.put_public_access_block(
            Bucket=name,
            PublicAccessBlockConfiguration={
                key: bool(value) for key, value in props["PublicAccessBlockConfiguration"].items()
            },
        )
    if props.get("VersioningConfiguration"):
        client.put_bucket_versioning(
            Bucket=name,
            VersioningConfiguration={"Status": props["VersioningConfiguration"]["Status"]},
        )
    rules = (props.get("LifecycleConfiguration") or {}).get("Rules") or []
    if rules:
        client.put_bucket_lifecycle_configuration(
            Bucket=name, LifecycleConfiguration={"Rules": lifecycle_rules_to_api(rules)}
        )
    if props.get("Tags"):
        client.put_bucket_tagging(Bucket=name, Tagging={"TagSet": props["Tags"]})
    for key in sorted(set(props) - _BUCKET_HANDLED):
        log.info("bucket %s: property %s is not emulated locally", bucket.logical_id, key)


def _bucket_exists(client: Any, name: str) -> bool:
    """Whether we own bucket ``name`` already (in us-east-1 ``CreateBucket`` on an owned
    bucket succeeds, and moto then replaces it with an empty one)."""
    try:
        client.head_bucket(Bucket=name)
    except client.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise
    return True


def create_buckets(client: Any, template: Template, resolver: Resolver) -> dict[str, str]:
    """Create every bucket (encryption, public access block, versioning, lifecycle, tags)."""
    names: dict[str, str] = {}
    for bucket in template.buckets.values():
        if not _enabled(bucket.condition, resolver):
            continue
        name = resolver.physical_name(bucket.logical_id)
        names[bucket.logical_id] = name
        if _bucket_exists(client, name):
            continue  # kept from the last run (a data dir): as it was configured then
        client.create_bucket(Bucket=name)  # us-east-1: no LocationConstraint
        _configure_bucket(client, bucket, name, resolver)
    return names


# ---------------------------------------------------------------------------- KMS keys
def create_kms_keys(client: Any, template: Template, resolver: Resolver) -> dict[str, str]:
    """Create every ``AWS::KMS::Key`` (symmetric unless ``KeySpec`` says otherwise) with the
    alias that is its local physical name (``Ref``); return logical id → alias."""
    names: dict[str, str] = {}
    for logical_id, resource in template.resources.items():
        if resource.get("Type") != KMS_KEY_TYPE or not _enabled(
            resource.get("Condition"), resolver
        ):
            continue
        name = resolver.physical_name(logical_id)
        names[logical_id] = name
        try:
            client.describe_key(KeyId=name)
            continue  # kept from the last run (a data dir) under its alias
        except client.exceptions.NotFoundException:
            pass
        props = resolver.resolve(dict(resource.get("Properties") or {})) or {}
        created = client.create_key(
            Description=str(props.get("Description", logical_id)),
            KeyUsage=str(props.get("KeyUsage", "ENCRYPT_DECRYPT")),
            KeySpec=str(props.get("KeySpec", "SYMMETRIC_DEFAULT")),
        )
        client.create_alias(AliasName=name, TargetKeyId=created["KeyMetadata"]["KeyId"])
    return names


def create_resources(
    dynamodb: Any, s3: Any, template: Template, resolver: Resolver, kms: Any = None
) -> dict[str, str]:
    """Create all tables, buckets and (given a ``kms`` client) KMS keys; return logical id →
    physical name."""
    keys = create_kms_keys(kms, template, resolver) if kms is not None else {}
    return {
        **create_tables(dynamodb, template, resolver),
        **create_buckets(s3, template, resolver),
        **keys,
    }
