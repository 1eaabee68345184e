"""The local stack's function environments do not share the API's routers (a shared
Powertools router validates a request against a concurrent request's event)."""

from __future__ import annotations

from pathlib import Path

from cirrusmq_local.lambda_runtime import FunctionRuntime
from cirrusmq_local.template import load_template

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


def test_two_environments_of_a_function_have_their_own_routers():
    function = load_template(TEMPLATE).functions["ConsumeFunction"]
    runtime = FunctionRuntime(function, "consume")
    try:
        first, second = runtime._load(), runtime._load()  # two invocations in flight
        routers = [h.__globals__["consume"].router for h in (first, second)]
        assert routers[0] is not routers[1]
        apps = [h.__globals__["app"] for h in (first, second)]
        assert [r.api_resolver for r in routers] == apps
    finally:
        runtime.unload()
