"""CirrusMQ's fixtures for LocalStack's vendored SQS tests (``make test-compat``).

``tests/compat/outside/run_localstack_sqs.py`` starts a CirrusMQ local stack and runs pytest
here, in the suite's own venv, with LocalStack's testing settings in the environment
(``TEST_AWS_ENDPOINT_URL`` the stack, ``TEST_AWS_ACCESS_KEY_ID`` its admin key, account
``000000000000``, region ``us-east-1``, ``TEST_SKIP_LOCALSTACK_START``). This file stands in
for LocalStack's own ``tests/conftest.py``, which starts LocalStack in process: it loads
LocalStack's fixture plugins, builds the clients the tests use (``aws_client.sqs`` speaks AWS
JSON 1.0, ``aws_client.sqs_query`` the query protocol) against that endpoint, and deselects the
tests ``applicable.txt`` names as not applicable. The tests themselves run unmodified.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest_plugins = [
    "localstack.testing.pytest.fixtures",
    "localstack_snapshot.pytest.snapshot",
    "localstack.testing.pytest.marking",
]

STACK_MARKER = "CIRRUSMQ_COMPAT_STACK"
"""Set by the runner to the stack's endpoint, which ``TEST_AWS_ENDPOINT_URL`` must name."""

ACCOUNT_ID = "000000000000"
"""CirrusMQ's fixed pseudo account id: its queue URLs are ``/{ACCOUNT_ID}/{name}``."""

REGION = "us-east-1"
LOCALSTACK_QUEUE_HOST = "http://sqs.<region>.localhost.localstack.cloud:4566"
SELECTION = Path(__file__).parent / "applicable.txt"


def not_applicable() -> dict[str, str]:
    """The tests ``applicable.txt`` excludes: test name (class::function) -> reason."""
    excluded: dict[str, str] = {}
    reason = ""
    for raw in SELECTION.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            reason = line[1:-1]
        else:
            excluded[line] = reason
    return excluded


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run without the runner's stack; aim LocalStack's own URLs at it.

    ``tests/aws/conftest.py`` sets LocalStack's gateway to port 4566, where LocalStack would
    listen in process; ``config.internal_service_url()`` (a test posts to it directly) must
    name the stack instead.
    """
    endpoint = os.environ.get(STACK_MARKER)
    if not endpoint or os.environ.get("TEST_AWS_ENDPOINT_URL") != endpoint:
        pytest.exit("run through tests/compat/outside/run_localstack_sqs.py (make test-compat)", 2)
    from localstack import config as localstack_config

    gateway = urlsplit(endpoint)
    localstack_config.GATEWAY_LISTEN = localstack_config.UniqueHostAndPortList(
        [localstack_config.HostAndPort(host=gateway.hostname, port=gateway.port)]
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the AWS-validated tests that ``applicable.txt`` does not exclude.

    Tests marked ``requires_in_process`` change LocalStack's in-process settings (retention
    periods shortened below SQS's minimum, ...) and apply only to LocalStack run in process.
    """
    excluded = not_applicable()
    selected, deselected = [], []
    for item in items:
        name = item.nodeid.split("::", 1)[1].split("[", 1)[0]
        applies = (
            item.get_closest_marker("aws_validated") is not None
            and item.get_closest_marker("requires_in_process") is None
            and name not in excluded
        )
        (selected if applies else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


@pytest.fixture(scope="session")
def aws_session():
    """A boto3 session with the stack's admin key and LocalStack's SQS query-protocol model."""
    from localstack.testing.aws.util import base_aws_session

    return base_aws_session()


@pytest.fixture(scope="session")
def aws_client_factory(aws_session):
    """LocalStack's client factory, aimed at ``TEST_AWS_ENDPOINT_URL`` (the stack)."""
    from localstack.testing.aws.util import base_aws_client_factory

    return base_aws_client_factory(aws_session)


@pytest.fixture(scope="session")
def aws_client(aws_client_factory):
    """Service clients by attribute: ``aws_client.sqs``, ``aws_client.sqs_query``."""
    from localstack.testing.aws.util import base_testing_aws_client

    return base_testing_aws_client(aws_client_factory)


@pytest.fixture
def _snapshot_session(_snapshot_session):
    """localstack-snapshot's session, which also writes the stack's endpoint as LocalStack's.

    The recorded queue URLs carry LocalStack's host (``http://sqs.<region>.localhost.
    localstack.cloud:4566``, AWS's ``https://sqs.<region>.amazonaws.com`` rewritten when the
    snapshots were recorded); CirrusMQ's carry the stack's endpoint. The account and queue name
    after the host are still compared.
    """
    from localstack_snapshot.snapshots.transformer import RegexTransformer

    endpoint = os.environ[STACK_MARKER].rstrip("/")
    _snapshot_session.add_transformer(RegexTransformer(endpoint, LOCALSTACK_QUEUE_HOST), priority=1)
    return _snapshot_session


@pytest.fixture(scope="session")
def account_id() -> str:
    """LocalStack's ``account_id`` asks STS; CirrusMQ serves no STS and has one account."""
    return ACCOUNT_ID


@pytest.fixture(scope="session")
def region_name() -> str:
    return REGION
