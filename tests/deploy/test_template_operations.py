"""template.yaml's operations parts: tracing, the group metrics schedule, the alarms on the
metrics the functions emit (to an optional SNS topic), and the dashboard."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cirrusmq_api.observability import REQUEST_METRICS
from cirrusmq_broker.telemetry import NAMESPACE, SERVICE
from cirrusmq_local.cfn_yaml import load_yaml

ROOT = Path(__file__).resolve().parents[2]
GROUP_METRICS = {"Lag", "InFlight", "OldestUnackedAge", "DeadLetters"}
"""What functions/group_metrics/app.py emits."""


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_yaml(ROOT / "template.yaml")


def resources(template: dict, kind: str) -> dict[str, dict]:
    return {n: r for n, r in template["Resources"].items() if r["Type"] == kind}


def test_every_function_is_traced_and_names_the_metrics_namespace(template):
    function = template["Globals"]["Function"]
    assert function["Tracing"] == "Active"
    assert function["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == NAMESPACE
    assert function["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == SERVICE


def test_the_group_metrics_run_every_minute_with_read_only_access(template):
    function = template["Resources"]["GroupMetricsFunction"]["Properties"]
    [event] = function["Events"].values()
    assert event == {"Type": "Schedule", "Properties": {"Schedule": "rate(1 minute)"}}
    assert (ROOT / function["CodeUri"] / "app.py").is_file()
    assert all(next(iter(p)) == "DynamoDBReadPolicy" for p in function["Policies"])


def test_the_admin_function_serves_the_group_list_and_reads_the_group_metrics(template):
    function = template["Resources"]["AdminFunction"]["Properties"]
    routes = {
        (e["Properties"]["Method"], e["Properties"]["Path"]) for e in function["Events"].values()
    }
    assert {("GET", "/v1/groups"), ("GET", "/v1/groups/{group}/metrics")} <= routes
    statements = [s for p in function["Policies"] if "Statement" in p for s in p["Statement"]]
    [read] = [s for s in statements if "cloudwatch:GetMetricData" in str(s["Action"])]
    assert (read["Effect"], read["Action"], read["Resource"]) == (
        "Allow",
        "cloudwatch:GetMetricData",
        "*",  # GetMetricData takes no resource-level permission
    )


def test_alarms_watch_emitted_metrics_and_notify_the_optional_topic(template):
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    assert set(alarms) == {
        "GroupLagAlarm",
        "OldestUnackedAgeAlarm",
        "DeadLettersAlarm",
        "ServerErrorsAlarm",
        "ThrottlesAlarm",
    }
    emitted = GROUP_METRICS | set(REQUEST_METRICS)
    for name, alarm in alarms.items():
        props = alarm["Properties"]
        if props["Namespace"] == NAMESPACE:
            assert props["MetricName"] in emitted, name
            # the service-wide series: every group's / request's datapoint is recorded there
            assert props["Dimensions"] == [{"Name": "service", "Value": SERVICE}], name
        else:  # the front door's 5xx: the function URL's, or the HTTP API's
            assert props["Namespace"] == {
                "Fn::If": ["FunctionUrlFrontDoor", "AWS/Lambda", "AWS/ApiGateway"]
            }
            assert props["MetricName"] == {"Fn::If": ["FunctionUrlFrontDoor", "Url5xxCount", "5xx"]}
            assert props["Dimensions"] == {
                "Fn::If": [
                    "FunctionUrlFrontDoor",
                    [{"Name": "FunctionName", "Value": {"Ref": "FrontDoorFunction"}}],
                    [{"Name": "ApiId", "Value": {"Ref": "HttpApi"}}],
                ]
            }
        assert props["TreatMissingData"] == "notBreaching", name  # no traffic is no alarm
        for actions in ("AlarmActions", "OKActions"):
            assert props[actions] == {
                "Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]
            }, name
    assert template["Parameters"]["AlarmTopicArn"]["Default"] == ""
    assert template["Conditions"]["HasAlarmTopic"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]
    }
    thresholds = {
        "GroupLagAlarm": "GroupLagAlarmThreshold",
        "OldestUnackedAgeAlarm": "OldestUnackedAgeAlarmSeconds",
        "ThrottlesAlarm": "ThrottlesAlarmThreshold",
    }
    for alarm, parameter in thresholds.items():
        assert alarms[alarm]["Properties"]["Threshold"] == {"Ref": parameter}
        assert template["Parameters"][parameter]["Type"] == "Number"
    dead = alarms["DeadLettersAlarm"]["Properties"]
    assert (dead["Threshold"], dead["ComparisonOperator"]) == (0, "GreaterThanThreshold")


def test_the_dashboard_is_json_charting_emitted_metrics_and_the_alarms(template):
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    body, variables = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    names = set(re.findall(r"\$\{([A-Za-z0-9:.]+)\}", body))
    alarms = set(resources(template, "AWS::CloudWatch::Alarm"))
    assert names == {"AWS::Region", "FrontDoor5xx"} | {f"{a}.Arn" for a in alarms}
    # the front door's 5xx series: the function URL's, or the HTTP API's
    condition, url_5xx, api_5xx = variables["FrontDoor5xx"]["Fn::If"]
    assert condition == "FunctionUrlFrontDoor"
    documents = []
    for series, metric, resource in (
        (url_5xx, '"AWS/Lambda", "Url5xxCount", "FunctionName", "', "FrontDoorFunction"),
        (api_5xx, '"AWS/ApiGateway", "5xx", "ApiId", "', "HttpApi"),
    ):
        assert series == {"Fn::Join": ["", [metric, {"Ref": resource}, '"']]}
        text = body.replace("${FrontDoor5xx}", f'{metric}x"')
        documents.append(json.loads(re.sub(r"\$\{[A-Za-z:.]+\}", "x", text)))
    document = documents[0]
    charted = set(re.findall(r'MetricName=\\?"(\w+)\\?"', body))
    assert charted <= GROUP_METRICS | set(REQUEST_METRICS)
    assert {"Lag", "OldestUnackedAge", "DeadLetters", "Requests", "Errors"} <= charted
    [alarm_widget] = [w for w in document["widgets"] if w["type"] == "alarm"]
    assert len(alarm_widget["properties"]["alarms"]) == len(alarms)


def test_cors_lets_a_browser_send_and_read_the_correlation_id(template):
    cors = template["Resources"]["HttpApi"]["Properties"]["CorsConfiguration"]["Fn::If"][1]
    assert "x-cirrus-correlation-id" in cors["AllowHeaders"]
    assert cors["ExposeHeaders"] == ["x-cirrus-correlation-id"]
