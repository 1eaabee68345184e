"""The local stack end to end: moto subprocess, resources, gateway, schedules, CLI.

Most tests run a throwaway template with an echo handler written here, so they do not depend
on CirrusMQ's own handlers; the last ones start the real template.yaml.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cirrusmq.credentials import Credentials
from cirrusmq.testing import LocalStack

ROOT = Path(__file__).resolve().parents[2]

ECHO_HANDLER = """
import base64, json, os, time

def lambda_handler(event, context):
    if "requestContext" not in event:  # a scheduled event
        with open(os.environ["ECHO_SCHEDULE_LOG"], "a") as log:
            log.write(json.dumps(event) + "\\n")
        return {"scheduled": event}
    item = (event.get("pathParameters") or {}).get("item")
    if item == "boom":
        raise RuntimeError("kaboom")
    if item == "plain":
        return {"hello": "world"}
    if item == "text":
        return "just text"
    if item == "binary":
        return {"statusCode": 200, "headers": {"content-type": "application/octet-stream"},
                "body": base64.b64encode(b"\\x00\\xff").decode(), "isBase64Encoded": True}
    if item == "cookies":
        return {"statusCode": 201, "cookies": ["a=1", "b=2; Path=/"],
                "multiValueHeaders": {"x-multi": ["1", "2"]}, "body": ""}
    if item == "unserialisable":
        return {"statusCode": 200, "body": object()}
    if item == "rendezvous":  # waits (up to 60 s) until 6 requests are in here at once
        here = os.path.join(os.path.dirname(os.environ["ECHO_SCHEDULE_LOG"]), "rendezvous")
        os.makedirs(here, exist_ok=True)
        open(os.path.join(here, context.aws_request_id), "w").close()
        deadline = time.monotonic() + 60
        while len(os.listdir(here)) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        return {"met": len(os.listdir(here)) >= 6}
    names = ("ECHO_TABLE", "ECHO_BUCKET", "ECHO_SECRET", "CIRRUSMQ_AWS_ENDPOINT_URL",
             "CIRRUSMQ_AWS_REGION", "AWS_ENDPOINT_URL")
    return {
        "statusCode": 200,
        "headers": {"content-type": "application/json", "x-function": "echo"},
        "body": json.dumps({
            "event": event,
            "context": {
                "function_name": context.function_name,
                "memory_limit_in_mb": context.memory_limit_in_mb,
                "invoked_function_arn": context.invoked_function_arn,
                "aws_request_id": context.aws_request_id,
                "remaining": context.get_remaining_time_in_millis(),
            },
            "env": {name: os.environ.get(name) for name in names},
            "module": __name__,
        }),
    }
"""

OTHER_HANDLER = """
def lambda_handler(event, context):
    return {"statusCode": 200, "body": "other:" + __name__}
"""

TEMPLATE = """
AWSTemplateFormatVersion: 2010-09-09
Transform: AWS::Serverless-2016-10-31
Parameters:
  Secret: {{Type: String, NoEcho: true, MinLength: 16}}
Globals:
  Function:
    Timeout: 7
    MemorySize: 256
    Environment:
      Variables:
        ECHO_TABLE: !Ref ItemsTable
        ECHO_BUCKET: !Ref ItemsBucket
Resources:
  ItemsTable:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions:
        - {{AttributeName: pk, AttributeType: S}}
        - {{AttributeName: owner, AttributeType: S}}
      KeySchema: [{{AttributeName: pk, KeyType: HASH}}]
      GlobalSecondaryIndexes:
        - IndexName: by_owner
          KeySchema: [{{AttributeName: owner, KeyType: HASH}}]
          Projection: {{ProjectionType: ALL}}
      TimeToLiveSpecification: {{AttributeName: ttl, Enabled: true}}
  ItemsBucket:
    Type: AWS::S3::Bucket
    Properties:
      LifecycleConfiguration:
        Rules:
          - Id: short
            Status: Enabled
            ExpirationInDays: 1
            TagFilters: [{{Key: tier, Value: "1"}}]
          - {{Id: tmp, Status: Enabled, Prefix: tmp/, ExpirationInDays: 2}}
  EchoFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: echo/
      Handler: app.lambda_handler
      Environment:
        Variables:
          ECHO_SECRET: !Ref Secret
          ECHO_SCHEDULE_LOG: "{schedule_log}"
      Events:
        GetItem: {{Type: HttpApi, Properties: {{Method: GET, Path: "/v1/items/{{item}}"}}}}
        PutItem: {{Type: HttpApi, Properties: {{Method: POST, Path: /v1/items}}}}
        Tick:
          Type: Schedule
          Properties: {{Schedule: rate(1 second), Input: '{{"task": "tick"}}'}}
        Nightly:
          Type: Schedule
          Properties: {{Schedule: "cron(0 3 * * ? *)", Enabled: false}}
  OtherFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: other/
      Handler: app.lambda_handler
      Events:
        Who: {{Type: HttpApi, Properties: {{Method: GET, Path: /v1/other}}}}
"""


def write_project(root: Path) -> Path:
    """A throwaway SAM project: the template above plus its two handlers."""
    (root / "echo").mkdir(parents=True)
    (root / "other").mkdir()
    (root / "echo" / "app.py").write_text(ECHO_HANDLER)
    (root / "other" / "app.py").write_text(OTHER_HANDLER)
    template = root / "template.yaml"
    template.write_text(TEMPLATE.format(schedule_log=root / "schedule.log"))
    return template


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_project(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="module")
def stack(project: Path) -> Iterator[LocalStack]:
    with LocalStack(project, parameters={"Secret": "s" * 20}) as running:
        yield running


@pytest.fixture(scope="module")
def http(stack: LocalStack) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stack.endpoint, timeout=30) as client:
        yield client


def echo(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return response.json()


# ------------------------------------------------------------------ real template
@pytest.mark.skipif(
    not (ROOT / "functions" / "admin" / "app.py").exists(),
    reason="functions/admin/app.py is not written yet",
)
def test_real_template(cirrusmq_stack: LocalStack) -> None:
    """The stack of template.yaml (through the pytest plugin's session fixture).

    It runs first in this module, before the module's own stack starts: stacks in one process
    share os.environ, so the session stack's handlers must not run while another is up.
    """
    names = cirrusmq_stack.resources
    dynamodb = cirrusmq_stack.boto3_client("dynamodb")
    for logical_id, table in cirrusmq_stack.template.tables.items():
        described = dynamodb.describe_table(TableName=names[logical_id])["Table"]
        assert described["KeySchema"] == list(table.key_schema)
        expected_indexes = {index["IndexName"] for index in table.global_secondary_indexes}
        actual_indexes = {i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])}
        assert actual_indexes == expected_indexes
        ttl = dynamodb.describe_time_to_live(TableName=names[logical_id])["TimeToLiveDescription"]
        if table.time_to_live is not None:
            assert ttl["AttributeName"] == table.time_to_live.attribute_name
            assert ttl["TimeToLiveStatus"] == "ENABLED"
    s3 = cirrusmq_stack.boto3_client("s3")
    bucket = names["MessageBucket"]
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert {rule["ID"] for rule in rules} == {
        rule["Id"] for rule in cirrusmq_stack.template.buckets["MessageBucket"].lifecycle_rules
    }
    encryption = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]
    assert encryption["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    response = httpx.get(f"{cirrusmq_stack.endpoint}/v1/health", timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "ok"


# ---------------------------------------------------------------------- resources
def test_resources_are_created_from_the_template(stack: LocalStack) -> None:
    assert dict(stack.resources) == {
        "ItemsTable": "cirrusmq-ItemsTable",
        "ItemsBucket": "cirrusmq-itemsbucket-local",
    }
    dynamodb = stack.boto3_client("dynamodb")
    table = dynamodb.describe_table(TableName="cirrusmq-ItemsTable")["Table"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert [index["IndexName"] for index in table["GlobalSecondaryIndexes"]] == ["by_owner"]
    ttl = dynamodb.describe_time_to_live(TableName="cirrusmq-ItemsTable")
    assert ttl["TimeToLiveDescription"] == {"TimeToLiveStatus": "ENABLED", "AttributeName": "ttl"}
    s3 = stack.boto3_client("s3")
    rules = s3.get_bucket_lifecycle_configuration(Bucket="cirrusmq-itemsbucket-local")["Rules"]
    by_id = {rule["ID"]: rule for rule in rules}
    assert by_id["short"]["Filter"] == {"Tag": {"Key": "tier", "Value": "1"}}
    assert by_id["short"]["Expiration"] == {"Days": 1}
    assert by_id["tmp"]["Filter"] == {"Prefix": "tmp/"}


def test_stack_attributes(stack: LocalStack) -> None:
    assert stack.endpoint.startswith("http://127.0.0.1:")
    assert stack.aws_endpoint.startswith("http://127.0.0.1:")
    assert isinstance(stack.credentials, Credentials)
    assert stack.credentials.access_key == "local-admin"
    assert stack.credentials.secret_key not in repr(stack.credentials)
    assert stack.parameters["Secret"] == "s" * 20


# -------------------------------------------------------------------- environment
def test_environment_is_set_for_handlers_only_with_cirrusmq_names(
    stack: LocalStack, http: httpx.Client
) -> None:
    env = echo(http.get("/v1/items/x"))["env"]
    assert env == {
        "ECHO_TABLE": "cirrusmq-ItemsTable",
        "ECHO_BUCKET": "cirrusmq-itemsbucket-local",
        "ECHO_SECRET": "s" * 20,
        "CIRRUSMQ_AWS_ENDPOINT_URL": stack.aws_endpoint,
        "CIRRUSMQ_AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": os.environ.get("AWS_ENDPOINT_URL"),  # untouched
    }
    assert "AWS_ACCESS_KEY_ID" not in stack.environment
    assert os.environ["CIRRUSMQ_AWS_ENDPOINT_URL"] == stack.aws_endpoint


# ------------------------------------------------------------------ event format
def test_http_event_is_payload_v2(stack: LocalStack, http: httpx.Client) -> None:
    response = http.get(
        "/v1/items/a%20b",
        params=[("q", "1"), ("q", "2"), ("empty", "")],
        headers=[("X-Dup", "one"), ("X-Dup", "two"), ("Cookie", "c1=v1; c2=v2")],
    )
    assert response.headers["x-function"] == "echo"
    body = echo(response)
    event = body["event"]
    assert event["version"] == "2.0"
    assert event["routeKey"] == "GET /v1/items/{item}"
    assert event["rawPath"] == "/v1/items/a%20b"
    assert event["rawQueryString"] == "q=1&q=2&empty="
    assert event["queryStringParameters"] == {"q": "1,2", "empty": ""}
    assert event["pathParameters"] == {"item": "a b"}
    assert event["cookies"] == ["c1=v1", "c2=v2"]
    assert event["headers"]["x-dup"] == "one,two"
    assert "cookie" not in event["headers"]
    assert all(name == name.lower() for name in event["headers"])
    assert event["isBase64Encoded"] is False
    assert "body" not in event
    context = event["requestContext"]
    assert context["routeKey"] == "GET /v1/items/{item}"
    assert context["stage"] == "$default"
    assert context["accountId"] == "123456789012"
    assert context["http"]["method"] == "GET"
    assert context["http"]["path"] == "/v1/items/a%20b"
    assert context["http"]["sourceIp"] == "127.0.0.1"
    assert context["http"]["userAgent"].startswith("python-httpx")
    assert abs(context["timeEpoch"] / 1000 - time.time()) < 60
    assert context["requestId"] and context["domainName"] == "127.0.0.1"
    lambda_context = body["context"]
    assert lambda_context["function_name"] == "cirrusmq-EchoFunction"
    assert lambda_context["memory_limit_in_mb"] == "256"
    assert lambda_context["invoked_function_arn"].endswith(":function:cirrusmq-EchoFunction")
    assert 0 < lambda_context["remaining"] <= 7000


def test_text_and_binary_bodies(http: httpx.Client) -> None:
    event = echo(http.post("/v1/items", content="héllo".encode()))["event"]
    assert event["body"] == "héllo" and event["isBase64Encoded"] is False
    assert event["routeKey"] == "POST /v1/items"
    assert "pathParameters" not in event
    binary = bytes(range(256))
    event = echo(http.post("/v1/items", content=binary))["event"]
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == binary


def test_handler_modules_do_not_collide(http: httpx.Client) -> None:
    echo_module = echo(http.get("/v1/items/x"))["module"]
    other = http.get("/v1/other").text
    assert other.startswith("other:") and other != f"other:{echo_module}"
    assert "EchoFunction" in echo_module and "OtherFunction" in other


# ---------------------------------------------------------------- response format
def test_response_mapping(http: httpx.Client) -> None:
    plain = http.get("/v1/items/plain")
    assert plain.status_code == 200
    assert plain.headers["content-type"] == "application/json"
    assert plain.json() == {"hello": "world"}
    text = http.get("/v1/items/text")
    assert text.status_code == 200 and text.text == "just text"
    binary = http.get("/v1/items/binary")
    assert binary.content == b"\x00\xff"
    assert binary.headers["content-type"] == "application/octet-stream"
    cookies = http.get("/v1/items/cookies")
    assert cookies.status_code == 201
    assert cookies.headers.get_list("set-cookie") == ["a=1", "b=2; Path=/"]
    assert cookies.headers.get_list("x-multi") == ["1", "2"]


def test_errors(http: httpx.Client) -> None:
    crash = http.get("/v1/items/boom")
    assert crash.status_code == 500
    assert crash.json()["code"] == "InternalError"
    assert "kaboom" in crash.json()["message"]
    assert http.get("/v1/items/unserialisable").json()["code"] == "InternalError"
    missing = http.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json()["code"] == "RouteNotFound"
    assert http.get("/v1/items/").status_code == 404  # an empty segment is no parameter
    assert http.get("/v1/items/a/b").status_code == 404
    wrong = http.delete("/v1/items/x")
    assert wrong.status_code == 405 and wrong.json()["code"] == "MethodNotAllowed"
    assert wrong.headers["allow"] == "GET"
    assert http.post("/v1/other", content=b"x" * 1000).status_code == 405


def test_request_size_limit(http: httpx.Client) -> None:
    too_large = http.post("/v1/items", content=b"x" * (10 * 1024 * 1024 + 1))
    assert too_large.status_code == 413
    assert too_large.json()["code"] == "RequestTooLarge"
    just_fits = http.post("/v1/items", content=b"x" * (10 * 1024 * 1024))
    assert just_fits.status_code == 200


def test_requests_are_served_concurrently(stack: LocalStack) -> None:
    """Six handlers that each wait for all six to be in flight: served one after another,
    the first would wait alone and answer ``met: false``."""

    def call(_: int) -> Any:
        return httpx.get(f"{stack.endpoint}/v1/items/rendezvous", timeout=90).json()

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(call, range(6)))
    assert answers == [{"met": True}] * 6


# ---------------------------------------------------------------------- schedules
def test_run_schedule_passes_input_json(stack: LocalStack) -> None:
    assert stack.run_schedule("EchoFunction", "Tick") == {"scheduled": {"task": "tick"}}


def test_run_schedule_without_input_sends_a_scheduled_event(stack: LocalStack) -> None:
    event = stack.run_schedule("EchoFunction", "Nightly")["scheduled"]
    assert event["detail-type"] == "Scheduled Event"
    assert event["source"] == "aws.events"
    assert event["detail"] == {}
    assert event["resources"][0].startswith("arn:aws:events:us-east-1:123456789012:rule/")
    with pytest.raises(KeyError, match="EchoFunction/Tick"):
        stack.run_schedule("EchoFunction", "Nope")


def test_schedule_timer_fires(project: Path, stack: LocalStack) -> None:
    log = project.parent / "schedule.log"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if log.exists() and '{"task": "tick"}' in log.read_text():
            break
        time.sleep(0.1)
    ticks = [json.loads(line) for line in log.read_text().splitlines()]
    assert {"task": "tick"} in ticks


# ---------------------------------------------------------------------- lifecycle
def _port_open(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, int(port))) == 0


def test_start_stop_restores_everything(tmp_path: Path) -> None:
    template = write_project(tmp_path)
    (tmp_path / "other" / "app.py").unlink()  # a handler that is not written yet
    os.environ["ECHO_TABLE"] = "before"
    before = dict(os.environ)
    local = LocalStack(template, schedules=False)
    try:
        local.start()
        assert os.environ["ECHO_TABLE"] == "cirrusmq-ItemsTable"
        assert len(os.environ["ECHO_SECRET"]) == 48  # generated NoEcho secret
        endpoint, aws_endpoint = local.endpoint, local.aws_endpoint
        missing = httpx.get(f"{endpoint}/v1/other")
        assert missing.status_code == 500
        assert missing.json()["code"] == "InternalError"
        assert "does not exist" in missing.json()["message"]
        local.stop()
        local.stop()  # idempotent
        assert dict(os.environ) == before
        assert not _port_open(endpoint)
        assert not _port_open(aws_endpoint)
        with pytest.raises(RuntimeError, match="not running"):
            _ = local.endpoint
    finally:
        local.stop()
        os.environ.pop("ECHO_TABLE", None)


def test_overlapping_stacks_restore_the_environment(tmp_path: Path) -> None:
    before = os.environ.get("CIRRUSMQ_AWS_ENDPOINT_URL")
    first = LocalStack(write_project(tmp_path / "a"), schedules=False)
    second = LocalStack(write_project(tmp_path / "b"), schedules=False)
    try:
        first.start()
        second.start()
        assert os.environ["CIRRUSMQ_AWS_ENDPOINT_URL"] == second.aws_endpoint
        first.stop()  # the older stack stops first: the newer one's values stay
        assert os.environ["CIRRUSMQ_AWS_ENDPOINT_URL"] == second.aws_endpoint
    finally:
        first.stop()
        second.stop()
    assert os.environ.get("CIRRUSMQ_AWS_ENDPOINT_URL") == before


def test_testing_module_explains_the_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import cirrusmq.testing

    monkeypatch.setitem(sys.modules, "cirrusmq_local.stack", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'cirrusmq\[local\]'"):
        _ = cirrusmq.testing.LocalStack


def test_busy_port_is_an_os_error(tmp_path: Path) -> None:
    template = write_project(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        local = LocalStack(template, port=busy.getsockname()[1], schedules=False)
        with pytest.raises(OSError):
            local.start()
    assert not local.running
    assert "ECHO_SECRET" not in local.environment


def test_bad_template_fails_before_starting_anything(tmp_path: Path) -> None:
    template = write_project(tmp_path)
    with pytest.raises(Exception, match="shorter than 16"):
        LocalStack(template, parameters={"Secret": "short"}).start()


def test_cli_dev_runs_until_interrupted(tmp_path: Path) -> None:
    template = write_project(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "cirrusmq.cli", "dev", "--port", "0", "--template", str(template)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines: list[str] = []
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "Press Ctrl-C" in line:
                break
        output = "".join(lines)
        endpoint = next(l.split()[-1] for l in lines if "HTTP API" in l)  # noqa: E741
        aws_endpoint = next(l.split()[2] for l in lines if "AWS (moto)" in l)  # noqa: E741
        assert "cirrusmq-ItemsTable" in output and "local-admin" in output
        assert httpx.get(f"{endpoint}/v1/other").text.startswith("other:")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
        assert not _port_open(endpoint)
        assert not _port_open(aws_endpoint)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
