"""Adapter of moto's AWS-verified SQS tests to a CirrusMQ local stack (``make test-compat``).

``run_moto_sqs.py`` copies this file as ``tests/test_sqs/conftest.py`` into the unpacked moto
source distribution and runs ``pytest tests/test_sqs -m aws_verified`` there with
``MOTO_TEST_ALLOW_AWS_REQUEST=true``: the tests then make real requests with plain
``boto3.client("sqs", region_name=...)`` clients, as they do against AWS. The runner points
those clients at its local stack through the standard AWS environment variables
(``AWS_ENDPOINT_URL_SQS``, the access key); this file refuses to run without that endpoint (the
tests would otherwise reach AWS) and gives the tests the account id CirrusMQ's queue URLs
carry. The tests themselves run unmodified.
"""

from __future__ import annotations

import os

import pytest

ACCOUNT_ID = "000000000000"
"""CirrusMQ's fixed pseudo account id (docs/compat.md): queue URLs are ``/{ACCOUNT_ID}/{name}``."""

STACK_MARKER = "CIRRUSMQ_COMPAT_STACK"
"""Set by the runner to the stack's endpoint, which ``AWS_ENDPOINT_URL_SQS`` must name."""


def pytest_configure(config: pytest.Config) -> None:
    endpoint = os.environ.get(STACK_MARKER)
    if not endpoint or os.environ.get("AWS_ENDPOINT_URL_SQS") != endpoint:
        pytest.exit("run through tests/compat/outside/run_moto_sqs.py (make test-compat)", 2)


@pytest.fixture
def account_id() -> str:
    """The suite's own ``account_id`` asks STS; CirrusMQ serves no STS and has one account."""
    return ACCOUNT_ID
