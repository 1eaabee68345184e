"""template.yaml's DynamoDbCapacity parameter: on-demand tables by default; provisioned
capacity under target-tracking auto scaling on the message path's tables when asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cirrusmq_local.resolver import Resolver, resolve_parameters
from cirrusmq_local.resources import table_to_api
from cirrusmq_local.template import TemplateError, load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
HOT_TABLES = {"LogIndexTable", "QueueHeadsTable", "GroupsTable", "ProducersTable", "NoncesTable"}
"""The tables every produce, receive and ack writes: the ones a steady load provisions."""


@pytest.fixture(scope="module")
def template():
    return load_template(TEMPLATE)


def _resolver(template, **overrides: Any) -> Resolver:
    return Resolver(template, resolve_parameters(template, overrides))


def _scaling(template, resolver: Resolver) -> dict[tuple[str, str], dict[str, Any]]:
    """(ResourceId, ScalableDimension) -> the target-tracking configuration scaling it."""
    targets = {}
    for logical_id, resource in template.resources.items():
        if resource.get("Type") != "AWS::ApplicationAutoScaling::ScalableTarget":
            continue
        if not resolver.condition(resource["Condition"]):
            continue
        props = resolver.resolve(dict(resource["Properties"]))
        targets[logical_id] = props
    scaled = {}
    for resource in template.resources.values():
        if resource.get("Type") != "AWS::ApplicationAutoScaling::ScalingPolicy":
            continue
        if not resolver.condition(resource["Condition"]):
            continue
        props = resource["Properties"]
        target = targets[props["ScalingTargetId"]["Ref"]]
        key = (target["ResourceId"], target["ScalableDimension"])
        scaled[key] = {**props["TargetTrackingScalingPolicyConfiguration"], **target}
    return scaled


def test_default_is_on_demand_everywhere(template) -> None:
    resolver = _resolver(template)
    for logical_id, table in template.tables.items():
        api = table_to_api(table, logical_id, resolver)
        assert api["BillingMode"] == "PAY_PER_REQUEST", logical_id
        assert "ProvisionedThroughput" not in api
    assert _scaling(template, resolver) == {}


def test_provisioned_capacity_scales_every_hot_table_and_index(template) -> None:
    resolver = _resolver(
        template, DynamoDbCapacity="provisioned", ProvisionedMinUnits=2, ProvisionedMaxUnits=900
    )
    scaled = _scaling(template, resolver)
    for logical_id, table in template.tables.items():
        api = table_to_api(table, resolver.physical_name(logical_id), resolver)
        if logical_id not in HOT_TABLES:
            assert api["BillingMode"] == "PAY_PER_REQUEST", logical_id
            continue
        assert api["BillingMode"] == "PROVISIONED", logical_id
        units = {"ReadCapacityUnits": 2, "WriteCapacityUnits": 2}
        assert api["ProvisionedThroughput"] == units
        resources = [f"table/{resolver.physical_name(logical_id)}"]
        for index in api.get("GlobalSecondaryIndexes", []):
            assert index["ProvisionedThroughput"] == units
            resources.append(f"{resources[0]}/index/{index['IndexName']}")
        for resource in resources:
            kind = "index" if "/index/" in resource else "table"
            for unit, metric in (
                ("Read", "DynamoDBReadCapacityUtilization"),
                ("Write", "DynamoDBWriteCapacityUtilization"),
            ):
                policy = scaled.pop((resource, f"dynamodb:{kind}:{unit}CapacityUnits"))
                assert policy["TargetValue"] == 70
                assert policy["PredefinedMetricSpecification"]["PredefinedMetricType"] == metric
                assert (int(policy["MinCapacity"]), int(policy["MaxCapacity"])) == (2, 900)
    assert scaled == {}  # nothing scales a table that is not provisioned


def test_capacity_is_one_of_two_modes(template) -> None:
    with pytest.raises(TemplateError, match="not one of"):
        resolve_parameters(template, {"DynamoDbCapacity": "reserved"})
