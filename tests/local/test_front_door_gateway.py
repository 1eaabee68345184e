"""What the local gateway serves: the enabled functions' HttpApi routes, or the one enabled
function URL as a catch-all (a function URL's event: route key ``$default``, no path
parameters); never both."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cirrusmq_local.stack import FUNCTION_URL_ROUTE, front_door_routes
from cirrusmq_local.template import TemplateError, load_template

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def functions():
    return load_template(ROOT / "template.yaml").functions


def test_the_http_api_branch_serves_the_routes(functions) -> None:
    enabled = [functions["ProduceFunction"], functions["JanitorFunction"]]
    routes = front_door_routes(enabled, {"ProduceFunction": "produce", "JanitorFunction": "j"})
    assert {route.route_key for route, _ in routes} == {
        r.route_key for r in functions["ProduceFunction"].http_routes
    }
    assert {target for _, target in routes} == {"produce"}


def test_the_function_url_branch_serves_one_catch_all(functions) -> None:
    routes = front_door_routes([functions["FrontDoorFunction"]], {"FrontDoorFunction": "door"})
    assert routes == [(FUNCTION_URL_ROUTE, "door")]
    assert FUNCTION_URL_ROUTE.route_key == "$default"


def test_one_front_door_at_a_time(functions) -> None:
    door = functions["FrontDoorFunction"]
    with pytest.raises(TemplateError, match="next to HttpApi routes"):
        front_door_routes(
            [door, functions["AdminFunction"]], {"FrontDoorFunction": 1, "AdminFunction": 2}
        )
    other = dataclasses.replace(door, logical_id="OtherDoorFunction")
    with pytest.raises(TemplateError, match="one front door"):
        front_door_routes([door, other], {"FrontDoorFunction": 1, "OtherDoorFunction": 2})
