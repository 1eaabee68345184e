"""Browser fixtures: Debian's headless Chromium driven by Playwright against a local stack.

The browser is the system's ``chromium`` (``apt-get install chromium``; ``.ci/run`` installs
it); Playwright downloads nothing. A missing browser fails the tests with how to install it:
a console test is never skipped silently.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator

import pytest
from cirrusmq import Admin, Credentials
from cirrusmq.testing import LocalStack

TIMEOUT_MS = 60_000
"""How long a page action or an ``expect`` assertion waits for an element or an answer (a
loaded 2-core machine is slow)."""
REQUEST_TIMEOUT_S = TIMEOUT_MS / 1000
"""How long a test's own HTTP call or SDK request waits: a function's first call on a fresh
stack imports its handlers, seconds on a loaded machine (httpx's default is 5 s, the SDK's 10)."""
CREDENTIALS_KEY = "cirrusmq.console.credentials"
"""Where the console keeps the signed-in key in the tab's sessionStorage."""


@pytest.fixture(scope="module")
def cirrusmq_stack() -> Iterator[LocalStack]:
    """A stack of this module's own (no schedules: the tests drive every step)."""
    with LocalStack(schedules=False) as stack:
        yield stack


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = shutil.which("chromium")
    if executable is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (see .ci/run)")
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)  # assertions keep their own 5 s default otherwise
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser) -> Iterator[object]:
    """A fresh tab (its own session storage) whose page errors fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield tab
    finally:
        context.close()
    assert errors == [], f"the console raised in the browser: {errors}"


@pytest.fixture
def admin(cirrusmq_stack) -> Iterator[Admin]:
    with Admin(
        cirrusmq_stack.endpoint, cirrusmq_stack.credentials, request_timeout_s=REQUEST_TIMEOUT_S
    ) as client:
        yield client


@pytest.fixture
def name() -> str:
    return f"c{uuid.uuid4().hex[:10]}"


def console_url(stack: LocalStack, fragment: str = "") -> str:
    return f"{stack.endpoint}/console/{fragment}"


def sign_in(page, stack: LocalStack, credentials: Credentials | None = None) -> None:
    """Open the console and sign in; returns once the topics page is shown."""
    credentials = credentials or stack.credentials
    page.goto(console_url(stack))
    page.get_by_label("Access key").fill(credentials.access_key)
    page.get_by_label("Secret key").fill(credentials.secret_key)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("table", name="Topics this key may see").wait_for()
