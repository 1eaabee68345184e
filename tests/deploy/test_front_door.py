"""The function-URL branch of template.yaml (``FrontDoor=function-url``) agrees with the HTTP
API branch: the front door's route table is the template's routes, its role is exactly the
union of the routed functions' policies, its variables theirs; the two branches' conditions
exclude each other; the SAM translation makes a public function URL and ApiEndpoint names it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cirrusmq_local.cfn_yaml import load_yaml
from cirrusmq_local.front_door import render, table_path
from cirrusmq_local.template import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
FRONT_DOOR = "FrontDoorFunction"
ROUTED = (
    "AdminFunction",
    "ProduceFunction",
    "ConsumeFunction",
    "SqsFunction",
    "TransactionsFunction",
    "MqHttpFunction",
)
HTTP_API = {"Condition": "HttpApiFrontDoor"}
FUNCTION_URL = {"Condition": "FunctionUrlFrontDoor"}


@pytest.fixture(scope="module")
def resources() -> dict[str, Any]:
    return load_yaml(TEMPLATE)["Resources"]


def test_the_route_table_is_the_templates() -> None:
    template = load_template(TEMPLATE)
    path = table_path(template)
    assert path == ROOT / "functions" / "front_door" / "routes.json"
    assert path.read_text() == render(template), "run make front-door-routes"
    table = json.loads(path.read_text())["functions"]
    assert set(table) == set(ROUTED)
    for function, spec in table.items():
        assert (ROOT / "functions" / spec["code"] / "app.py").is_file(), function
        routes = template.functions[function].http_routes
        assert spec["routes"] == [route.route_key for route in routes]


def test_the_branches_exclude_each_other(resources: dict[str, Any]) -> None:
    template = load_yaml(TEMPLATE)
    assert template["Parameters"]["FrontDoor"]["Default"] == "http-api"
    assert template["Parameters"]["FrontDoor"]["AllowedValues"] == ["http-api", "function-url"]
    assert template["Conditions"]["HttpApiFrontDoor"] == {
        "Fn::Equals": [{"Ref": "FrontDoor"}, "http-api"]
    }
    assert template["Conditions"]["FunctionUrlFrontDoor"] == {
        "Fn::Equals": [{"Ref": "FrontDoor"}, "function-url"]
    }
    for name in ("HttpApi", *ROUTED):
        assert resources[name].get("Condition") == HTTP_API["Condition"], name
        log_group = resources[name]["Properties"].get("LoggingConfig", {}).get("LogGroup")
        if log_group:
            assert resources[log_group["Ref"]].get("Condition") == HTTP_API["Condition"]
    front = resources[FRONT_DOOR]
    assert front.get("Condition") == FUNCTION_URL["Condition"]
    log_group = front["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    assert resources[log_group].get("Condition") == FUNCTION_URL["Condition"]
    # every other resource exists in both branches: nothing else may name a routed function
    conditional = {"HttpApi", FRONT_DOOR, *ROUTED}
    for name, resource in resources.items():
        if name in conditional or resource.get("Condition"):
            continue
        text = json.dumps(resource)
        for other in conditional:
            references = (f'{{"Ref": "{other}"}}', f"${{{other}}}", f"${{{other}.", f'["{other}"')
            if any(reference in text for reference in references):
                assert '"Fn::If"' in text and "FunctionUrlFrontDoor" in text, (name, other)


def _grants(policies: list[Any]) -> set[tuple[str, ...]]:
    """A function's permissions as comparable grants: a SAM policy template per table /
    bucket / key / function, an inline statement per (action, resource)."""
    grants: set[tuple[str, ...]] = set()
    for policy in policies:
        if "Statement" not in policy:
            ((name, value),) = policy.items()
            grants.add((name, json.dumps(value, sort_keys=True)))
            continue
        for statement in policy["Statement"]:
            assert statement["Effect"] == "Allow"
            actions = statement["Action"]
            targets = statement["Resource"]
            for action in actions if isinstance(actions, list) else [actions]:
                for target in targets if isinstance(targets, list) else [targets]:
                    grants.add(("Statement", action, json.dumps(target, sort_keys=True)))
    return grants


def _without_reads_crud_covers(grants: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """DynamoDBReadPolicy on a table the grants also give DynamoDBCrudPolicy on says nothing
    more: left out."""
    crud = {g[1] for g in grants if g[0] == "DynamoDBCrudPolicy"}
    return {g for g in grants if not (g[0] == "DynamoDBReadPolicy" and g[1] in crud)}


def test_the_front_doors_role_is_the_union_of_the_routed_functions(resources) -> None:
    union: set[tuple[str, ...]] = set()
    for name in ROUTED:
        union |= _grants(resources[name]["Properties"]["Policies"])
    front = _grants(resources[FRONT_DOOR]["Properties"]["Policies"])
    assert front == _without_reads_crud_covers(union)


def test_the_front_door_has_the_routed_functions_variables(resources) -> None:
    front = resources[FRONT_DOOR]["Properties"]["Environment"]["Variables"]
    union: dict[str, Any] = {}
    for name in ROUTED:
        variables = resources[name]["Properties"].get("Environment", {}).get("Variables", {})
        for key, value in variables.items():
            assert union.setdefault(key, value) == value, f"{key} differs between functions"
    assert front == union


def test_the_function_url_is_public_and_checked_by_the_handlers(resources) -> None:
    properties = resources[FRONT_DOOR]["Properties"]
    config = properties["FunctionUrlConfig"]
    assert (config["AuthType"], config["InvokeMode"]) == ("NONE", "BUFFERED")
    assert properties["CodeUri"] == "functions/"
    assert properties["Handler"] == "front_door/app.lambda_handler"
    assert (ROOT / "functions" / "front_door" / "app.py").is_file()
    # the same CORS as the HTTP API's, from the same parameter
    api = resources["HttpApi"]["Properties"]["CorsConfiguration"]["Fn::If"]
    url = config["Cors"]["Fn::If"]
    assert url[0] == api[0] == "HasCorsOrigins"
    assert url[1] == api[1]
    assert resources["HttpApi"]["Properties"].get("Auth") is None  # no authorizer to keep


def test_the_sam_translation_makes_a_public_url_and_the_endpoint_names_it() -> None:
    from .test_template import _NoManagedPolicies, _packaged

    samtranslator = pytest.importorskip("samtranslator.translator.transform")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        translated = samtranslator.transform(
            _packaged(load_yaml(TEMPLATE)), {}, _NoManagedPolicies()
        )
    made = translated["Resources"]
    url = made[f"{FRONT_DOOR}Url"]
    assert (url["Type"], url["Condition"]) == ("AWS::Lambda::Url", "FunctionUrlFrontDoor")
    assert url["Properties"]["AuthType"] == "NONE"
    permissions = {
        r["Properties"]["Action"]
        for r in made.values()
        if r["Type"] == "AWS::Lambda::Permission"
        and r["Properties"]["FunctionName"] == {"Ref": FRONT_DOOR}
    }
    # since October 2025 a public function URL needs both
    assert permissions == {"lambda:InvokeFunctionUrl", "lambda:InvokeFunction"}
    for name, resource in made.items():
        if resource["Type"] == "AWS::Lambda::Permission" and name.startswith(FRONT_DOOR):
            assert resource["Properties"]["Principal"] == "*"
            assert resource["Condition"] == "FunctionUrlFrontDoor"
    endpoint = translated["Outputs"]["ApiEndpoint"]["Value"]["Fn::If"]
    assert endpoint[0] == "FunctionUrlFrontDoor"
    host = endpoint[1]["Fn::Join"][1][1]["Fn::Select"]
    assert host == [2, {"Fn::Split": ["/", {"Fn::GetAtt": [f"{FRONT_DOOR}Url", "FunctionUrl"]}]}]
    assert endpoint[2] == {
        "Fn::Sub": "https://${HttpApi}.execute-api.${AWS::Region}.${AWS::URLSuffix}"
    }
