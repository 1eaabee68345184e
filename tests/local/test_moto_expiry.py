"""The local stack's TTL and lifecycle expirers (on moto in-process) and the server's locks."""

from __future__ import annotations

import datetime as dt
import io
import json
import threading
from typing import Any

import boto3
import pytest
from cirrusmq_local.moto_expiry import (
    DAY_MS,
    ClockHistory,
    LifecycleExpirer,
    TtlExpirer,
    expiry_ms,
)
from cirrusmq_local.moto_serial import ResourceLocks, SharedExclusiveLock, resources_of
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends
from moto.s3.models import s3_backends

NOW_S = 1_700_000_000


@pytest.fixture
def aws() -> Any:
    with mock_aws():
        yield


def _log_table(ddb: Any, name: str = "log") -> None:
    ddb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": "s", "KeyType": "HASH"},
            {"AttributeName": "o", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "s", "AttributeType": "S"},
            {"AttributeName": "o", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"AttributeName": "exp", "Enabled": True}
    )


def _keys(ddb: Any, name: str = "log") -> set[int]:
    return {int(i["o"]["N"]) for i in ddb.scan(TableName=name)["Items"]}


# ------------------------------------------------------------------------------- TTL
def test_ttl_deletes_expired_numbers_only(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    _log_table(ddb)
    values = {
        0: {"N": str(NOW_S - 10)},  # expired
        1: {"N": str(NOW_S)},  # expires at exactly now
        2: {"N": str(NOW_S + 1)},  # not yet
        3: {"S": str(NOW_S - 10)},  # not a number: never
        4: None,  # no TTL attribute
        5: {"N": str(NOW_S - 6 * 365 * 86_400)},  # more than five years ago: DynamoDB ignores
    }
    for offset, value in values.items():
        item = {"s": {"S": "q"}, "o": {"N": str(offset)}}
        if value is not None:
            item["exp"] = value
        ddb.put_item(TableName="log", Item=item)
    expirer = TtlExpirer(dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"])
    result = expirer.run("log", NOW_S)
    assert (result.examined, result.deleted, result.pass_complete) == (6, 2, True)
    assert _keys(ddb) == {2, 3, 4, 5}
    assert expirer.run("log", NOW_S + 1).deleted == 1
    assert _keys(ddb) == {3, 4, 5}


def test_ttl_runs_in_bounded_slices_and_resumes(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    _log_table(ddb)
    for offset in range(25):
        ddb.put_item(
            TableName="log",
            Item={"s": {"S": f"q{offset % 3}"}, "o": {"N": str(offset)}, "exp": {"N": str(NOW_S)}},
        )
    expirer = TtlExpirer(dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"], chunk=4)
    slices = []
    while True:
        result = expirer.run("log", NOW_S, budget=10)
        slices.append(result.examined)
        if result.pass_complete:
            break
    assert slices == [10, 10, 5] and _keys(ddb) == set()


def test_ttl_leaves_tables_without_ttl(aws: None) -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    _log_table(ddb)
    ddb.update_time_to_live(
        TableName="log", TimeToLiveSpecification={"AttributeName": "exp", "Enabled": False}
    )
    ddb.put_item(TableName="log", Item={"s": {"S": "q"}, "o": {"N": "0"}, "exp": {"N": "1"}})
    expirer = TtlExpirer(dynamodb_backends[DEFAULT_ACCOUNT_ID]["us-east-1"])
    assert expirer.run("log", NOW_S).deleted == 0 and expirer.run("nope", NOW_S).pass_complete
    assert _keys(ddb) == {0}


# ------------------------------------------------------------------------- lifecycle
def test_expiry_is_rounded_up_to_the_next_midnight() -> None:
    created = int(dt.datetime(2024, 1, 15, 10, 30, tzinfo=dt.UTC).timestamp() * 1000)
    assert expiry_ms(created, 3) == int(dt.datetime(2024, 1, 19, tzinfo=dt.UTC).timestamp() * 1000)
    midnight = int(dt.datetime(2024, 1, 15, tzinfo=dt.UTC).timestamp() * 1000)
    assert expiry_ms(midnight, 1) == midnight + 2 * DAY_MS  # never earlier than S3


def test_clock_history_gives_the_offset_in_force() -> None:
    history = ClockHistory([[0, 0], [1000, 50], [2000, 80]])
    assert [history.offset_at(t) for t in (500, 1000, 1999, 5000)] == [0, 50, 50, 80]
    assert ClockHistory().offset_at(123) == 0


RULES = [
    {"ID": "t1", "Status": "Enabled", "Filter": {"Tag": {"Key": "tier", "Value": "1"}},
     "Expiration": {"Days": 1}},
    {"ID": "t3", "Status": "Enabled", "Filter": {"Tag": {"Key": "tier", "Value": "3"}},
     "Expiration": {"Days": 3}},
    {"ID": "tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"}, "Expiration": {"Days": 2}},
    {"ID": "big", "Status": "Enabled",
     "Filter": {"And": {"Prefix": "big/", "ObjectSizeGreaterThan": 10}},
     "Expiration": {"Days": 1}},
    {"ID": "off", "Status": "Disabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1}},
]  # fmt: skip


def _bucket() -> tuple[Any, int]:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="bucket-b")
    for key, tagging, size in [
        ("a", "tier=1", 1),
        ("c", "tier=3", 1),
        ("tmp/x", "", 1),
        ("keep", "other=1", 1),
        ("big/large", "", 100),
        ("big/small", "", 5),
    ]:
        s3.put_object(Bucket="bucket-b", Key=key, Body=b"x" * size, Tagging=tagging)
    modified = s3.head_object(Bucket="bucket-b", Key="a")["LastModified"]
    return s3, int(modified.timestamp() * 1000)


def _names(s3: Any) -> set[str]:
    return {o["Key"] for o in s3.list_objects_v2(Bucket="bucket-b").get("Contents", [])}


def test_lifecycle_expires_by_rule_days_tags_prefix_and_size(aws: None) -> None:
    s3, created = _bucket()
    expirer = LifecycleExpirer(s3_backends[DEFAULT_ACCOUNT_ID]["global"])
    everything = {"a", "c", "tmp/x", "keep", "big/large", "big/small"}
    assert expirer.run("bucket-b", RULES, created + DAY_MS).deleted == 0  # before the midnight
    assert _names(s3) == everything
    expirer.run("bucket-b", RULES, expiry_ms(created, 1))
    assert _names(s3) == everything - {"a", "big/large"}
    expirer.run("bucket-b", RULES, expiry_ms(created, 3))
    assert _names(s3) == {"keep", "big/small"}


def test_lifecycle_measures_age_on_the_broker_clock(aws: None) -> None:
    s3, created = _bucket()
    expirer = LifecycleExpirer(s3_backends[DEFAULT_ACCOUNT_ID]["global"])
    # the broker clock was 10 days ahead when the objects were written: they are new
    history = ClockHistory([[0, 0], [created - 1000, 10 * DAY_MS]])
    assert expirer.run("bucket-b", RULES, created + 10 * DAY_MS + DAY_MS, history).deleted == 0
    assert expirer.run("bucket-b", RULES, expiry_ms(created + 10 * DAY_MS, 1), history).deleted == 2


def test_lifecycle_without_rules_or_bucket_does_nothing(aws: None) -> None:
    s3, created = _bucket()
    expirer = LifecycleExpirer(s3_backends[DEFAULT_ACCOUNT_ID]["global"])
    assert expirer.run("bucket-b", [], created + 100 * DAY_MS).pass_complete
    assert expirer.run("missing", RULES, created + 100 * DAY_MS).deleted == 0
    assert len(_names(s3)) == 6


# ----------------------------------------------------------------------------- locks
def _environ(target: str | None = None, body: Any = None, **extra: str) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else b""
    environ: dict[str, Any] = {"CONTENT_LENGTH": str(len(data)), "wsgi.input": io.BytesIO(data)}
    if target:
        environ["HTTP_X_AMZ_TARGET"] = f"DynamoDB_20120810.{target}"
    environ.update(extra)
    return environ


S3_AUTH = "AWS4-HMAC-SHA256 Credential=testing/20240101/us-east-1/s3/aws4_request, ..."


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (_environ("PutItem", {"TableName": "t"}), ["dynamodb:t"]),
        (
            _environ("Query", {"TableName": "arn:aws:dynamodb:us-east-1:1:table/t"}),
            ["dynamodb:t"],
        ),
        (
            _environ("BatchWriteItem", {"RequestItems": {"a": [], "b": []}}),
            ["dynamodb:a", "dynamodb:b"],
        ),
        (
            _environ(
                "TransactWriteItems",
                {"TransactItems": [{"Put": {"TableName": "a"}}, {"Update": {"TableName": "b"}}]},
            ),
            ["dynamodb:a", "dynamodb:b"],
        ),
        (_environ("ListTables", {}), None),
        (_environ("ExecuteStatement", {"Statement": "SELECT"}), None),
        (_environ(PATH_INFO="/b/topics/x", HTTP_AUTHORIZATION=S3_AUTH), ["s3:b"]),
        (
            _environ(
                PATH_INFO="/b/k", HTTP_AUTHORIZATION=S3_AUTH, HTTP_X_AMZ_COPY_SOURCE="/src/k2"
            ),
            ["s3:b", "s3:src"],
        ),
        (
            _environ(PATH_INFO="/k", HTTP_HOST="b.localhost:5000", HTTP_AUTHORIZATION=S3_AUTH),
            ["s3:b"],
        ),
        (_environ(PATH_INFO="/", HTTP_AUTHORIZATION=S3_AUTH), None),
        (_environ(PATH_INFO="/moto-api/data.json"), None),
    ],
)
def test_requests_lock_the_tables_and_buckets_they_name(
    environ: dict[str, Any], expected: list[str] | None
) -> None:
    body = environ["wsgi.input"].getvalue()
    assert resources_of(environ) == expected
    assert environ["wsgi.input"].read() == body  # the body is still there for moto


def test_exclusive_waits_for_shared_holders_and_blocks_new_ones() -> None:
    lock = SharedExclusiveLock()
    events: list[str] = []
    inside = threading.Event()
    release = threading.Event()

    def reader() -> None:
        with lock.shared():
            inside.set()
            release.wait(5)
            events.append("reader done")

    def writer() -> None:
        with lock.exclusive():
            events.append("writer")

    first = threading.Thread(target=reader)
    first.start()
    inside.wait(5)
    second = threading.Thread(target=writer)
    second.start()
    second.join(0.2)
    assert events == []  # the writer waits for the reader
    release.set()
    first.join(5)
    second.join(5)
    assert events == ["reader done", "writer"]


def test_resource_locks_serialise_one_name_not_others() -> None:
    locks = ResourceLocks()
    taken: list[str] = []

    def take(name: str) -> None:
        with locks.hold([name]):
            taken.append(name)

    with locks.hold(["dynamodb:a"]):
        other = threading.Thread(target=take, args=("dynamodb:b",))
        other.start()
        other.join(5)
        assert taken == ["dynamodb:b"]  # another table is not blocked
        same = threading.Thread(target=take, args=("dynamodb:a",))
        same.start()
        same.join(0.2)
        assert taken == ["dynamodb:b"]  # the same table is
    same.join(5)
    assert taken == ["dynamodb:b", "dynamodb:a"]
