"""Schemathesis against the running local stack: the OpenAPI document is true.

Positive and negative examples of every operation (bounded), each signed with the stack's
admin key inside the call: no 5xx, every status code, content type, header and body as
documented, data the document forbids is refused, and a refused request (4xx) changes
nothing in the tables or the bucket (the nonce every signed request leaves is bookkeeping,
not state: NoncesTable is left out).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from api_helpers import RequestsAuth

schemathesis = pytest.importorskip("schemathesis")
pytestmark = pytest.mark.serial  # under pytest-xdist its parametrization collapses to one item

from hypothesis import HealthCheck, Phase, settings  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
MAX_EXAMPLES = 5
"""Per operation and generation mode; keeps the whole fuzz under a minute."""


def served_document() -> dict[str, Any]:
    """The document /v1/openapi.json serves, built in-process (tests are collected before
    the stack starts; ``test_the_fuzzed_document_is_the_served_one`` checks they agree)."""
    from cirrusmq_api.routes.meta import openapi_document

    return json.loads(openapi_document())


schema = schemathesis.openapi.from_dict(served_document())
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=MAX_EXAMPLES
)


LAST_STATE: dict[str, str] = {}
"""The stored state after the last case (the next case's state before it)."""
TALLY: collections.Counter[str] = collections.Counter()
"""Cases sent signed / unsigned and answers by class, over this module's run."""


@pytest.fixture(scope="module")
def cirrusmq_stack() -> Iterator[Any]:
    """A stack of this module's own: each case digests every table and the bucket before and
    after it, which must not grow with what the rest of the suite stored."""
    from cirrusmq.testing import LocalStack

    with LocalStack(schedules=False, expire_interval=None) as stack:  # nothing changes by itself
        yield stack


def test_the_fuzzed_document_is_the_served_one(api):
    assert api.get("/v1/openapi.json").json() == served_document()


@pytest.fixture(scope="module")
def stored_state(cirrusmq_stack) -> Callable[[], str]:
    """A function giving a digest of every table's items and the bucket's keys."""
    dynamodb, s3 = cirrusmq_stack.boto3_client("dynamodb"), cirrusmq_stack.boto3_client("s3")
    return functools.partial(_digest, cirrusmq_stack.resources, dynamodb, s3)


NOT_STATE = frozenset({"NoncesTable", "AccessKeySecretsKey"})
"""Left out of the digest: one nonce item per signed request; the KMS key (not a table)."""


def _hex(value: Any) -> str:
    """Binary attributes (an access key's secret ciphertext) as hex."""
    return bytes(value).hex()


def _digest(resources: Mapping[str, str], dynamodb: Any, s3: Any) -> str:
    digest = hashlib.sha256()
    for logical_id, name in sorted(resources.items()):
        if logical_id in NOT_STATE:
            continue
        if logical_id == "MessageBucket":
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=name)
            keys = sorted(o["Key"] for page in pages for o in page.get("Contents", []))
            digest.update(json.dumps(keys).encode())
            continue
        pages = dynamodb.get_paginator("scan").paginate(TableName=name, ConsistentRead=True)
        items = sorted(
            json.dumps(i, sort_keys=True, default=_hex) for p in pages for i in p["Items"]
        )
        digest.update(f"{logical_id}:{len(items)}:".encode())
        digest.update("\n".join(items).encode())
    return digest.hexdigest()


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_answers_as_documented(case, cirrusmq_stack, stored_state):
    # Only the cases change this stack (its own, without schedules or TTL expiry): the state
    # after one case is the state before the next, so each case digests once.
    before = LAST_STATE.pop("digest", None) or stored_state()  # a failed case leaves none
    # A generated Authorization header (the documented security scheme) is replaced by the
    # real signature; a case without one (negative: the scheme left out) goes unsigned.
    signed = "authorization" in {name.lower() for name in case.headers or {}}
    _shorten_long_polls(case)
    response = case.call_and_validate(
        base_url=cirrusmq_stack.endpoint,
        checks=CHECKS,
        timeout=60,
        auth=RequestsAuth(cirrusmq_stack.credentials) if signed else None,
    )
    TALLY["signed" if signed else "unsigned"] += 1
    TALLY[f"status {response.status_code // 100}xx"] += 1
    if signed:
        assert response.status_code not in (401, 403), response.text  # signed as the admin
    else:
        assert response.status_code == 401 or case.operation.path == "/v1/health", response.text
    after = LAST_STATE["digest"] = stored_state()
    if 400 <= response.status_code < 500:
        assert after == before, (
            f"{case.method} {case.formatted_path} answered {response.status_code} "
            f"but changed the stored state: {response.text[:300]}"
        )


def _shorten_long_polls(case: Any) -> None:
    """A valid ``wait_seconds`` above 1 s becomes 1 s: an idle long poll answers after its
    wait, and three long-poll routes x examples of up to 20 s would make the fuzz minutes long.
    Other values (negative data: out of range, wrong types) are sent as generated."""
    for container in (case.query, case.body):
        if isinstance(container, dict):
            wait = container.get("wait_seconds")
            if type(wait) in (int, float) and 1 < wait <= 20:
                container["wait_seconds"] = 1


def test_the_fuzz_was_mostly_signed():
    """Runs after the fuzz: most cases were signed (the scheme's header was generated), so
    the service's behaviour behind the signature was fuzzed, not just its 401."""
    print(f"fuzz tally: {dict(TALLY)}")
    assert TALLY["signed"] > TALLY["unsigned"], TALLY
