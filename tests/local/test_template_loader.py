"""cirrusmq_local's reading of template.yaml: YAML tags, typed view, resolver, translations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cirrusmq_local.cfn_yaml import CloudFormationLoader
from cirrusmq_local.resolver import Resolver, resolve_parameters
from cirrusmq_local.resources import (
    bucket_encryption_to_api,
    lifecycle_rules_to_api,
    table_to_api,
)
from cirrusmq_local.schedules import Rate, parse_schedule
from cirrusmq_local.template import TemplateError, load_template, merge_globals

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"


def _yaml(text: str) -> object:
    return yaml.load(text, Loader=CloudFormationLoader)  # noqa: S506


# ------------------------------------------------------------------------ YAML tags
def test_short_tags_become_long_form() -> None:
    data = _yaml(
        """
        a: !Ref Thing
        b: !GetAtt Bucket.Arn
        c: !GetAtt [Table, StreamArn]
        d: !Sub "${Bucket.Arn}/topics/*"
        e: !Join [",", [!Ref A, !Ref B]]
        f: !If [IsProd, 1, !Ref "AWS::NoValue"]
        g: !Equals [!Ref Env, prod]
        h: !Condition IsProd
        i: !Sub ["${x}-y", {x: !Ref X}]
        j: 2010-09-09
        """
    )
    assert data == {
        "a": {"Ref": "Thing"},
        "b": {"Fn::GetAtt": ["Bucket", "Arn"]},
        "c": {"Fn::GetAtt": ["Table", "StreamArn"]},
        "d": {"Fn::Sub": "${Bucket.Arn}/topics/*"},
        "e": {"Fn::Join": [",", [{"Ref": "A"}, {"Ref": "B"}]]},
        "f": {"Fn::If": ["IsProd", 1, {"Ref": "AWS::NoValue"}]},
        "g": {"Fn::Equals": [{"Ref": "Env"}, "prod"]},
        "h": {"Condition": "IsProd"},
        "i": {"Fn::Sub": ["${x}-y", {"x": {"Ref": "X"}}]},
        "j": "2010-09-09",  # CloudFormation keeps dates as text
    }


def test_getatt_without_attribute_is_an_error() -> None:
    with pytest.raises(yaml.YAMLError):
        _yaml("a: !GetAtt Bucket")


def test_plain_safe_loader_is_untouched() -> None:
    assert yaml.safe_load("d: 2010-09-09")["d"].year == 2010


# ---------------------------------------------------------------- the real template
@pytest.fixture(scope="module")
def template():
    return load_template(TEMPLATE)


def test_tables(template) -> None:
    assert set(template.tables) == {
        "TopicsTable",
        "LogIndexTable",
        "GroupsTable",
        "ProducersTable",
        "QueueHeadsTable",
        "AccessKeysTable",
        "NoncesTable",
        "TransactionsTable",
        "TimersTable",  # delayed messages
        "ConnectionsTable",  # the notification channel's connections and waiters
    }
    log_index = template.tables["LogIndexTable"]
    assert [k["AttributeName"] for k in log_index.key_schema] == ["stream", "base_offset"]
    defaults = Resolver(template, resolve_parameters(template))
    assert table_to_api(log_index, "t", defaults)["BillingMode"] == "PAY_PER_REQUEST"
    assert log_index.time_to_live is not None
    assert log_index.time_to_live.attribute_name == "expires_at"
    groups = template.tables["GroupsTable"]
    assert [index["IndexName"] for index in groups.global_secondary_indexes] == ["by_topic"]
    assert template.tables["TopicsTable"].time_to_live is None


def test_websocket_routes_and_stream_events(template) -> None:
    assert template.websocket_routes == {
        "$connect": "NotifyFunction",
        "$disconnect": "NotifyFunction",
        "wait": "NotifyFunction",
        "$default": "NotifyFunction",
    }
    (stream,) = template.functions["NotifyFunction"].streams
    assert stream.table == "QueueHeadsTable"
    assert stream.patterns and "dynamodb" in stream.patterns[0]


def test_bucket(template) -> None:
    bucket = template.buckets["MessageBucket"]
    # 7 retention tiers + 2 timer tiers + the large bodies' abandoned multipart uploads
    assert len(bucket.lifecycle_rules) == 10
    (abort,) = [r for r in bucket.lifecycle_rules if "AbortIncompleteMultipartUpload" in r]
    assert abort["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 1}
    assert bucket.encryption is not None
    assert bucket.public_access_block == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }


def test_functions_merge_globals(template) -> None:
    assert set(template.functions) == {
        "AdminFunction",
        "ProduceFunction",
        "ConsumeFunction",
        "JanitorFunction",
        "TransactionsFunction",
        "TxnCheckerFunction",
        "SchedulerFunction",  # delayed messages
        "GroupMetricsFunction",
        "MqHttpFunction",  # RocketMQ HTTP protocol (docs/compat.md)
        "SqsFunction",  # the SQS API (docs/compat.md)
        "NotifyFunction",  # the notification channel
        "FrontDoorFunction",  # FrontDoor=function-url: every route behind a function URL
    }
    assert [f for f, fn in template.functions.items() if fn.function_url] == ["FrontDoorFunction"]
    admin = template.functions["AdminFunction"]
    assert admin.code_uri == ROOT / "functions" / "admin"
    assert admin.handler == "app.lambda_handler"
    assert admin.timeout == 30
    assert admin.memory_size == {"Ref": "FunctionMemorySize"}  # from Globals
    defaults = Resolver(template, resolve_parameters(template))
    assert defaults.function(admin).memory_size == 1024
    assert admin.environment["CIRRUSMQ_TOPICS_TABLE"] == {"Ref": "TopicsTable"}
    consume = template.functions["ConsumeFunction"]
    assert consume.environment["CIRRUSMQ_RECEIPT_SECRET"] == {"Ref": "ReceiptSigningSecret"}
    assert consume.environment["CIRRUSMQ_BUCKET"] == {"Ref": "MessageBucket"}  # from Globals
    janitor = template.functions["JanitorFunction"]
    assert janitor.timeout == 300


def test_events(template) -> None:
    admin = template.functions["AdminFunction"]
    keys = {route.route_key for route in admin.http_routes}
    assert "GET /v1/health" in keys
    assert "DELETE /v1/topics/{topic}" in keys
    assert {"GET /console", "GET /console/{name}"} <= keys  # web console
    sqs = {route.route_key for route in template.functions["SqsFunction"].http_routes}
    # the query protocol may also come as GET (presigned URLs); the bare root is its route too
    assert sqs == {
        "POST /",
        "POST /{account_id}/{queue_name}",
        "GET /",
        "GET /{account_id}/{queue_name}",
    }
    assert "GET /" not in keys
    janitor = template.functions["JanitorFunction"]
    assert janitor.http_routes == ()
    sweep = {event.event_name: event for event in janitor.schedules}["SweepOrphans"]
    assert sweep.expression == "rate(1 hour)"
    assert sweep.input == '{"task": "sweep_orphans"}'
    assert sweep.enabled
    resume = {event.event_name: event for event in janitor.schedules}["ResumeMoveTasks"]
    assert (resume.expression, resume.input) == ("rate(1 minute)", '{"task": "resume_move_tasks"}')
    assert resume.enabled  # the local stack runs it on its timer too


def test_parameters(template) -> None:
    secret = template.parameters["ReceiptSigningSecret"]
    assert secret.default is None and secret.no_echo and secret.min_length == 32
    assert template.parameters["OrphanGraceSeconds"].default == "300"


# -------------------------------------------------------------------------- resolver
def test_parameter_values(template) -> None:
    first, second = resolve_parameters(template), resolve_parameters(template)
    assert len(first["ReceiptSigningSecret"]) == 48
    assert first["ReceiptSigningSecret"] != second["ReceiptSigningSecret"]
    assert first["OrphanGraceSeconds"] == "300"
    given = resolve_parameters(template, {"ReceiptSigningSecret": "s" * 40, "LogRetentionDays": 7})
    assert given["ReceiptSigningSecret"] == "s" * 40
    assert given["LogRetentionDays"] == "7"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"ReceiptSigningSecret": "short"}, "shorter than 32"),
        ({"OrphanGraceSeconds": 10}, "below 120"),
        ({"LogRetentionDays": 2}, "not one of"),
        ({"NoSuchParameter": "x"}, "unknown template parameter"),
    ],
)
def test_parameter_constraints(template, overrides, message) -> None:
    with pytest.raises(TemplateError, match=message):
        resolve_parameters(template, overrides)


def test_resolver_names_and_intrinsics(template) -> None:
    resolver = Resolver(template, resolve_parameters(template), stack_name="Dev Stack")
    assert resolver.physical_name("TopicsTable") == "cirrusmq-TopicsTable"
    assert resolver.physical_name("MessageBucket") == "cirrusmq-messagebucket-dev-stack"
    assert resolver.resolve({"Ref": "OrphanGraceSeconds"}) == "300"
    assert resolver.resolve({"Fn::GetAtt": ["MessageBucket", "Arn"]}) == (
        "arn:aws:s3:::cirrusmq-messagebucket-dev-stack"
    )
    assert resolver.resolve({"Fn::Sub": "${MessageBucket.Arn}/topics/* ${AWS::Region} ${!x}"}) == (
        "arn:aws:s3:::cirrusmq-messagebucket-dev-stack/topics/* us-east-1 ${x}"
    )
    assert resolver.resolve({"Fn::Join": ["/", [{"Ref": "TopicsTable"}, "x"]]}) == (
        "cirrusmq-TopicsTable/x"
    )
    assert resolver.resolve({"Fn::GetAtt": ["TopicsTable", "Arn"]}) == (
        "arn:aws:dynamodb:us-east-1:123456789012:table/cirrusmq-TopicsTable"
    )
    assert resolver.resolve({"a": {"Ref": "AWS::NoValue"}, "b": [1, {"Ref": "AWS::NoValue"}]}) == {
        "b": [1]
    }
    with pytest.raises(TemplateError, match="no such parameter or resource"):
        resolver.resolve({"Ref": "Nope"})
    with pytest.raises(TemplateError, match="not supported"):
        resolver.resolve({"Fn::ImportValue": "x"})


def test_resolved_environment(template) -> None:
    parameters = resolve_parameters(template)
    resolver = Resolver(template, parameters)
    env = resolver.environment(template.functions["ConsumeFunction"])
    assert env["CIRRUSMQ_RECEIPT_SECRET"] == parameters["ReceiptSigningSecret"]
    assert env["CIRRUSMQ_GROUPS_TABLE"] == "cirrusmq-GroupsTable"
    assert env["CIRRUSMQ_BUCKET"] == "cirrusmq-messagebucket-local"
    janitor = resolver.environment(template.functions["JanitorFunction"])
    assert janitor["CIRRUSMQ_ORPHAN_GRACE_SECONDS"] == "300"


def test_conditions_and_explicit_names(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text(
        """
Parameters:
  Env: {Type: String, Default: dev}
Conditions:
  IsProd: !Equals [!Ref Env, prod]
Resources:
  Named:
    Type: AWS::DynamoDB::Table
    Properties:
      TableName: !Sub "${AWS::StackName}-named"
      BillingMode: !If [IsProd, PROVISIONED, PAY_PER_REQUEST]
      AttributeDefinitions: [{AttributeName: k, AttributeType: S}]
      KeySchema: [{AttributeName: k, KeyType: HASH}]
"""
    )
    template = load_template(path)
    resolver = Resolver(template, resolve_parameters(template), stack_name="s1")
    assert resolver.physical_name("Named") == "s1-named"
    assert not resolver.condition("IsProd")
    kwargs = table_to_api(template.tables["Named"], "s1-named", resolver)
    assert kwargs["BillingMode"] == "PAY_PER_REQUEST"
    assert "ProvisionedThroughput" not in kwargs


def test_merge_globals() -> None:
    merged = merge_globals(
        {"Timeout": 30, "Environment": {"Variables": {"A": "1", "B": "2"}}, "Layers": ["x"]},
        {"Timeout": 300, "Environment": {"Variables": {"B": "3"}}, "Layers": ["y"]},
    )
    assert merged == {
        "Timeout": 300,
        "Environment": {"Variables": {"A": "1", "B": "3"}},
        "Layers": ["x", "y"],
    }


def test_missing_template_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="template not found"):
        load_template(tmp_path / "nope.yaml")


# --------------------------------------------------------------------- translations
def test_lifecycle_translation() -> None:
    rules = lifecycle_rules_to_api(
        [
            {
                "Id": "one-tag",
                "Status": "Enabled",
                "ExpirationInDays": 3,
                "TagFilters": [{"Key": "k", "Value": "3"}],
            },
            {
                "Id": "prefix-and-tags",
                "Status": "Disabled",
                "Prefix": "topics/",
                "ExpirationInDays": 1,
                "TagFilters": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
                "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 2},
            },
            {"Id": "everything", "Status": "Enabled", "NoncurrentVersionExpirationInDays": 5},
            {"Id": "by-prefix", "Status": "Enabled", "Prefix": "tmp/", "ExpirationInDays": 9},
        ]
    )
    assert rules[0] == {
        "ID": "one-tag",
        "Status": "Enabled",
        "Filter": {"Tag": {"Key": "k", "Value": "3"}},
        "Expiration": {"Days": 3},
    }
    assert rules[1]["Filter"] == {
        "And": {
            "Prefix": "topics/",
            "Tags": [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"}],
        }
    }
    assert rules[1]["Status"] == "Disabled"
    assert rules[1]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 2}
    assert rules[2]["Filter"] == {"Prefix": ""}
    assert rules[2]["NoncurrentVersionExpiration"] == {"NoncurrentDays": 5}
    assert rules[3]["Filter"] == {"Prefix": "tmp/"}


def test_encryption_translation() -> None:
    api = bucket_encryption_to_api(
        {
            "ServerSideEncryptionConfiguration": [
                {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
            ]
        }
    )
    assert api == {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}


# ------------------------------------------------------------------------- schedules
@pytest.mark.parametrize(
    ("expression", "interval"),
    [
        ("rate(1 minute)", timedelta(minutes=1)),
        ("rate(5 minutes)", timedelta(minutes=5)),
        ("rate(1 hour)", timedelta(hours=1)),
        ("rate(2 hours)", timedelta(hours=2)),
        ("rate(1 day)", timedelta(days=1)),
        ("rate(30 seconds)", timedelta(seconds=30)),
    ],
)
def test_rate_expressions(expression: str, interval: timedelta) -> None:
    assert parse_schedule(expression) == Rate(interval)


def test_cron_expressions() -> None:
    start = datetime(2026, 3, 2, 10, 7, 30, tzinfo=UTC)  # a Monday
    every_quarter = parse_schedule("cron(0/15 * * * ? *)")
    assert every_quarter.next_after(start) == datetime(2026, 3, 2, 10, 15, tzinfo=UTC)
    noon_weekdays = parse_schedule("cron(0 12 ? * MON-FRI *)")
    assert noon_weekdays.next_after(start) == datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    saturday = parse_schedule("cron(30 6 ? * SAT *)")
    assert saturday.next_after(start) == datetime(2026, 3, 7, 6, 30, tzinfo=UTC)
    first_of_month = parse_schedule("cron(0 0 1 * ? *)")
    assert first_of_month.next_after(start) == datetime(2026, 4, 1, tzinfo=UTC)
    assert parse_schedule("cron(0 0 1 1 ? 2020)").next_after(start) is None


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("rate(0 minutes)", "at least 1"),
        ("rate(5 weeks)", "unsupported schedule"),
        ("every hour", "unsupported schedule"),
        ("cron(0 12 * * * *)", "exactly one of"),
        ("cron(0 12 * *)", "6 fields"),
        ("cron(0 12 L * ? *)", "not supported"),
        ("cron(0 12 ? * 6#3 *)", "not supported"),
    ],
)
def test_bad_schedules(expression: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse_schedule(expression)
