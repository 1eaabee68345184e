"""pytest plugin (entry point ``pytest11``): the ``cirrusmq_stack`` fixture.

``cirrusmq_stack`` is a session-wide, started :class:`cirrusmq_local.LocalStack` (schedules off
by default: trigger them with ``cirrusmq_stack.run_schedule(...)``). Options:
``--cirrusmq-template PATH`` (or ``$CIRRUSMQ_TEMPLATE``), ``--cirrusmq-schedules`` and
``--cirrusmq-parameter NAME=VALUE`` (repeatable: the template's parameters, e.g.
``FrontDoor=function-url``).
``cirrusmq_stack.credentials`` is the stack's bootstrap admin key: sign with it (pass it to the
clients), or make narrower keys with it (``Admin.create_access_key``).
Nothing heavy is imported unless the fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from cirrusmq_local.stack import LocalStack


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cirrusmq")
    group.addoption(
        "--cirrusmq-template",
        default=None,
        help="SAM template for the cirrusmq_stack fixture (default: $CIRRUSMQ_TEMPLATE or "
        "CirrusMQ's template.yaml).",
    )
    group.addoption(
        "--cirrusmq-schedules",
        action="store_true",
        default=False,
        help="Run the template's schedules on timers in the cirrusmq_stack fixture.",
    )
    group.addoption(
        "--cirrusmq-parameter",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="A template parameter of the cirrusmq_stack fixture (repeatable), e.g."
        " FrontDoor=function-url.",
    )


@pytest.fixture(scope="session")
def cirrusmq_stack(request: pytest.FixtureRequest) -> Iterator[LocalStack]:
    """A started CirrusMQ local stack, shared by the whole test session."""
    from cirrusmq.testing import LocalStack

    parameters = {}
    for pair in request.config.getoption("--cirrusmq-parameter"):
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise pytest.UsageError(f"--cirrusmq-parameter {pair!r}: expected NAME=VALUE")
        parameters[name] = value
    stack = LocalStack(
        request.config.getoption("--cirrusmq-template"),
        schedules=request.config.getoption("--cirrusmq-schedules"),
        parameters=parameters or None,
    )
    with stack:
        yield stack
