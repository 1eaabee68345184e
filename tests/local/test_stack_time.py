"""``LocalStack.advance_time``: the broker clock moves, TTL'd items and objects past their
lifecycle rule are deleted (never earlier than AWS would), due schedules run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock

HANDLER = """
import json, os

def lambda_handler(event, context):
    with open(os.environ["TICK_LOG"], "a") as log:
        log.write(json.dumps(event) + "\\n")
    return {"ok": True}
"""

TEMPLATE = """
AWSTemplateFormatVersion: 2010-09-09
Transform: AWS::Serverless-2016-10-31
Resources:
  ItemsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{{AttributeName: pk, AttributeType: S}}]
      KeySchema: [{{AttributeName: pk, KeyType: HASH}}]
      TimeToLiveSpecification: {{AttributeName: expires_at, Enabled: true}}
  PlainTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{{AttributeName: pk, AttributeType: S}}]
      KeySchema: [{{AttributeName: pk, KeyType: HASH}}]
  ItemsBucket:
    Type: AWS::S3::Bucket
    Properties:
      LifecycleConfiguration:
        Rules:
          - Id: r1
            Status: Enabled
            ExpirationInDays: 1
            TagFilters: [{{Key: tier, Value: "1"}}]
          - Id: r3
            Status: Enabled
            ExpirationInDays: 3
            TagFilters: [{{Key: tier, Value: "3"}}]
  TickFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: tick/
      Handler: app.lambda_handler
      Environment: {{Variables: {{TICK_LOG: "{log}"}}}}
      Events:
        Minutely: {{Type: Schedule, Properties: {{Schedule: rate(1 minute)}}}}
        Hourly:
          Type: Schedule
          Properties: {{Schedule: rate(1 hour), Input: '{{"task": "hourly"}}'}}
"""

HOUR = 3600


@pytest.fixture(autouse=True)
def alone_on_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """These stacks start at wall time as if no other stack ran in this process (the broker
    clock is per process: the session's stack may have advanced it); both come back after."""
    from cirrusmq_local import stack as stack_module

    monkeypatch.setattr(clock, "_offset_ms", 0)
    monkeypatch.setattr(stack_module, "_RUNNING", set())


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "tick").mkdir()
    (tmp_path / "tick" / "app.py").write_text(HANDLER)
    template = tmp_path / "template.yaml"
    template.write_text(TEMPLATE.format(log=tmp_path / "ticks.log"))
    return template


@pytest.fixture
def stack(project: Path) -> Iterator[LocalStack]:
    with LocalStack(project, expire_interval=None) as running:
        yield running


def _ticks(project: Path) -> list[dict]:
    log = project.parent / "ticks.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_advance_time_expires_items_and_objects_and_fires_schedules(
    stack: LocalStack, project: Path
) -> None:
    ddb, s3 = stack.boto3_client("dynamodb"), stack.boto3_client("s3")
    table, plain = stack.resources["ItemsTable"], stack.resources["PlainTable"]
    bucket = stack.resources["ItemsBucket"]
    now = time.time()
    for key, expires in {
        "past": now - 10,
        "in-1h": now + HOUR,
        "in-10d": now + 10 * 86_400,
    }.items():
        ddb.put_item(
            TableName=table, Item={"pk": {"S": key}, "expires_at": {"N": str(int(expires))}}
        )
    ddb.put_item(TableName=table, Item={"pk": {"S": "forever"}})
    ddb.put_item(TableName=plain, Item={"pk": {"S": "p"}, "expires_at": {"N": "1"}})
    for key, tagging in {"t1": "tier=1", "t3": "tier=3", "untagged": ""}.items():
        s3.put_object(Bucket=bucket, Key=f"topics/{key}", Body=b"x", Tagging=tagging)

    def items() -> set[str]:
        return {i["pk"]["S"] for i in ddb.scan(TableName=table)["Items"]}

    def objects() -> set[str]:
        listing = s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        return {o["Key"].removeprefix("topics/") for o in listing}

    assert stack.expire_now() == {"items": 1, "objects": 0}
    assert items() == {"in-1h", "in-10d", "forever"}
    ticks_before = len(_ticks(project))

    before = clock.now_ms()
    assert stack.advance_time(2 * HOUR) == {"items": 1, "objects": 0}
    assert clock.offset_ms() == 2 * HOUR * 1000 and clock.now_ms() - before >= 2 * HOUR * 1000
    assert items() == {"in-10d", "forever"}
    assert objects() == {"t1", "t3", "untagged"}  # a day at least, rounded up to midnight
    assert ddb.scan(TableName=plain)["Count"] == 1  # no TTL on that table
    ticks = _ticks(project)[ticks_before:]
    assert {"task": "hourly"} in ticks
    minutely = [t for t in ticks if t.get("detail-type") == "Scheduled Event"]
    assert minutely and minutely[-1]["time"] >= time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(before / 1000 + 2 * HOUR - 5)
    )  # the event carries the broker's time

    stack.advance_time(2 * 86_400)
    assert objects() == {"t3", "untagged"}
    s3.put_object(Bucket=bucket, Key="topics/late", Body=b"x", Tagging="tier=1")
    stack.expire_now()
    assert "late" in objects()  # written now on the broker clock: not a day old yet
    stack.advance_time(2 * 86_400)
    assert objects() == {"untagged"}
    assert items() == {"in-10d", "forever"}
    stack.advance_time(6 * 86_400)
    assert items() == {"forever"}


def test_stop_sets_the_clock_back(project: Path) -> None:
    with LocalStack(project, expire_interval=None, schedules=False) as stack:
        stack.advance_time(HOUR)
        assert clock.offset_ms() == HOUR * 1000
    assert clock.offset_ms() == 0
    with pytest.raises(RuntimeError):
        stack.advance_time(1)


def test_a_stack_stopping_while_another_runs_leaves_the_clock(project: Path) -> None:
    other = LocalStack(project, expire_interval=None, schedules=False).start()
    try:
        with LocalStack(project, expire_interval=None, schedules=False) as stack:
            stack.advance_time(HOUR)
        assert clock.offset_ms() == HOUR * 1000  # the other stack's time does not go back
    finally:
        other.stop()
    assert clock.offset_ms() == 0


def test_the_timer_expires_items_in_the_background(project: Path) -> None:
    with LocalStack(project, expire_interval=0.2, schedules=False) as stack:
        ddb = stack.boto3_client("dynamodb")
        table = stack.resources["ItemsTable"]
        ddb.put_item(
            TableName=table,
            Item={"pk": {"S": "old"}, "expires_at": {"N": str(int(time.time()) - 5)}},
        )
        for _ in range(100):
            if not ddb.scan(TableName=table)["Items"]:
                break
            time.sleep(0.1)
        assert ddb.scan(TableName=table)["Items"] == []
