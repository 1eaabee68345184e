"""template.yaml is a valid SAM template: it translates to CloudFormation that cfn-lint accepts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from cirrusmq_local.cfn_yaml import load_yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"

samtranslator = pytest.importorskip("samtranslator")
cfnlint_api = pytest.importorskip("cfnlint.api")


class _NoManagedPolicies:
    """The translator asks IAM for managed policy ARNs only when a template names one."""

    def load(self) -> dict[str, str]:
        return {}


def _packaged(template: dict[str, Any]) -> dict[str, Any]:
    """What ``sam package`` does to local code: CodeUri/ContentUri become S3 URIs."""
    packaged = copy.deepcopy(template)
    for resource in packaged["Resources"].values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str) and not props[key].startswith("s3://"):
                props[key] = f"s3://artifacts/{props[key].strip('/')}.zip"
    return packaged


@pytest.fixture(scope="module")
def translated() -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        return transform(_packaged(load_yaml(TEMPLATE)), {}, _NoManagedPolicies())


def test_template_translates_to_cloudformation(translated: dict[str, Any]) -> None:
    types = {resource["Type"] for resource in translated["Resources"].values()}
    assert "AWS::Lambda::Function" in types
    assert "AWS::ApiGatewayV2::Api" in types
    assert "AWS::Events::Rule" in types
    assert not any(t.startswith("AWS::Serverless::") for t in types)


def test_translated_template_passes_cfn_lint(translated: dict[str, Any]) -> None:
    matches = cfnlint_api.lint(
        json.dumps(translated), config=cfnlint_api.ManualArgs(regions=["us-east-1"])
    )
    errors = [str(match) for match in matches if match.rule.id.startswith("E")]
    assert errors == []


def test_no_catch_all_routes() -> None:
    resources = load_yaml(TEMPLATE)["Resources"]
    routes = [
        event["Properties"]
        for resource in resources.values()
        for event in ((resource.get("Properties") or {}).get("Events") or {}).values()
        if event.get("Type") == "HttpApi"
    ]
    assert routes, "the template defines no HttpApi routes"
    for route in routes:
        assert "Path" in route and "Method" in route, f"implicit $default route: {route}"
        assert "+}" not in route["Path"], f"greedy path parameter in {route['Path']}"
        assert route["Method"].upper() not in {"ANY", "*"}, f"ANY method on {route['Path']}"


def _s3_actions(function: str, resource_suffix: str) -> set[str]:
    """The S3 actions the function's inline statements allow on ``<bucket>/<suffix>``."""
    policies = load_yaml(TEMPLATE)["Resources"][function]["Properties"]["Policies"]
    actions: set[str] = set()
    for policy in policies:
        for statement in policy.get("Statement", []) if isinstance(policy, dict) else []:
            resource = statement.get("Resource")
            text = json.dumps(resource, default=str)
            if statement.get("Effect") == "Allow" and resource_suffix in text:
                actions.update(statement["Action"])
    return actions


@pytest.mark.parametrize("function", ["TransactionsFunction", "TxnCheckerFunction"])
def test_a_commit_re_run_may_read_the_object_its_first_attempt_wrote(function: str) -> None:
    # The re-run finds the commit's topic object already there: it reads it (GetObject,
    # and HeadObject for its age, which S3 authorises as GetObject) before reusing it.
    assert "s3:GetObject" in _s3_actions(function, "/topics/*")
