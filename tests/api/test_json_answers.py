"""The API writes its answers with pydantic-core's JSON encoder: the same JSON values as
Powertools' ``json.dumps``, non-ASCII text as UTF-8 (never more bytes than the escapes the
receive's response size budget counts), and what pydantic-core refuses as Powertools would."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from cirrusmq_api.app import _POWERTOOLS_JSON, create_app, write_json
from hypothesis import given
from hypothesis import strategies as st

LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.text()  # any code point, lone surrogates included
)
JSON_VALUES = st.recursive(
    LEAVES | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
FLOATLESS_VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_the_same_json_value_as_powertools_writes(value: Any):
    assert json.loads(write_json(value)) == json.loads(_POWERTOOLS_JSON(value))


@given(FLOATLESS_VALUES)
def test_never_more_bytes_than_powertools_escaped_text(value: Any):
    """Floats aside (1e-05 may come out as 0.00001), which no receive answer holds."""
    assert len(write_json(value).encode("utf-8", "surrogatepass")) <= len(
        _POWERTOOLS_JSON(value).encode()
    )


def answering_app(answer: dict) -> Any:
    router = APIGatewayHttpRouter()

    @router.get("/v1/health")
    def health() -> dict:
        return answer

    return create_app(router)


def health_event() -> dict:
    return {
        "version": "2.0",
        "routeKey": "GET /v1/health",
        "rawPath": "/v1/health",
        "rawQueryString": "",
        "headers": {},
        "requestContext": {"http": {"method": "GET", "path": "/v1/health"}, "stage": "$default"},
        "isBase64Encoded": False,
    }


def test_an_answer_goes_out_as_utf8_text():
    answer = answering_app({"tag": "é\U0001f600", "n": 2**63}).resolve(health_event(), None)
    assert answer["statusCode"] == 200
    assert answer["body"] == '{"tag":"é\U0001f600","n":9223372036854775808}'


def test_an_answer_with_a_lone_surrogate_is_written_as_powertools_writes_it():
    answer = answering_app({"tag": "a\ud800"}).resolve(health_event(), None)
    assert answer["statusCode"] == 200
    assert answer["body"] == '{"tag":"a\\ud800"}'


class Plain:
    def __init__(self) -> None:
        self.a = 1


def test_an_unannotated_route_answers_an_object_as_before():
    """The response validation keeps Powertools' own writer of objects it does not know."""
    router = APIGatewayHttpRouter()

    @router.get("/v1/health")
    def health():  # noqa: ANN202 - no return annotation: the answer is not validated
        return Response(200, "application/json", body={"x": Plain()})

    answer = create_app(router).resolve(health_event(), None)
    assert answer["statusCode"] == 200
    assert json.loads(answer["body"]) == {"x": {"a": 1}}
