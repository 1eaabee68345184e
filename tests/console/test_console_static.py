"""The console's files over HTTP: served unsigned with a strict CSP, the API still signed,
and no console code that turns text into HTML."""

from __future__ import annotations

import re

import httpx
import pytest
from cirrusmq_api.routes.console import CONSOLE_DIR, CONTENT_SECURITY_POLICY

from .conftest import REQUEST_TIMEOUT_S

FILES = sorted(p.name for p in CONSOLE_DIR.iterdir() if p.suffix in {".html", ".js", ".css"})
HTML_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|srcdoc"
)


def test_every_console_file_is_served_unsigned_with_a_strict_csp(cirrusmq_stack):
    assert "index.html" in FILES and "app.js" in FILES
    for name in [*FILES, ""]:
        response = httpx.get(f"{cirrusmq_stack.endpoint}/console/{name}", timeout=REQUEST_TIMEOUT_S)
        assert response.status_code == 200, name
        assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "access-control-allow-origin" not in response.headers
    policy = dict(part.split(" ", 1) for part in CONTENT_SECURITY_POLICY.split("; "))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == policy["connect-src"] == policy["style-src"] == "'self'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY
    index = httpx.get(f"{cirrusmq_stack.endpoint}/console/", timeout=REQUEST_TIMEOUT_S)
    assert index.headers["content-type"] == "text/html; charset=utf-8"
    script = httpx.get(f"{cirrusmq_stack.endpoint}/console/app.js", timeout=REQUEST_TIMEOUT_S)
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"


def test_the_page_is_served_with_and_without_the_trailing_slash(cirrusmq_stack):
    index = (CONSOLE_DIR / "index.html").read_text(encoding="utf-8")
    for path in ("/console", "/console/"):
        response = httpx.get(cirrusmq_stack.endpoint + path, timeout=REQUEST_TIMEOUT_S)
        assert (response.status_code, response.text) == (200, index), path
    assert 'src="/console/app.js"' in index  # named absolutely: both URLs load it


@pytest.mark.parametrize(
    "path", ["/console/nope.js", "/console/..%2Fapp.py", "/console/%2e%2e", "/console/a/b.js"]
)
def test_anything_else_under_console_is_not_found(cirrusmq_stack, path):
    response = httpx.get(cirrusmq_stack.endpoint + path, timeout=REQUEST_TIMEOUT_S)
    assert response.status_code == 404
    assert response.json()["code"] == "RouteNotFound"


def test_the_api_stays_signed_and_the_console_only_reads(cirrusmq_stack):
    assert (
        httpx.get(f"{cirrusmq_stack.endpoint}/v1/topics", timeout=REQUEST_TIMEOUT_S).status_code
        == 401
    )
    refused = httpx.post(f"{cirrusmq_stack.endpoint}/console", json={}, timeout=REQUEST_TIMEOUT_S)
    assert refused.status_code == 405


def test_console_code_never_turns_text_into_html():
    for name in FILES:
        text = (CONSOLE_DIR / name).read_text(encoding="utf-8")
        assert not HTML_SINKS.search(text), name
        if name.endswith(".html"):
            assert "<script>" not in text and " style=" not in text, name  # no inline code


def test_the_root_sends_the_browser_to_the_console(cirrusmq_stack):
    response = httpx.get(cirrusmq_stack.endpoint + "/", timeout=REQUEST_TIMEOUT_S)
    assert response.status_code == 302
    assert response.headers["location"] == "/console/"
    followed = httpx.get(
        cirrusmq_stack.endpoint + "/", follow_redirects=True, timeout=REQUEST_TIMEOUT_S
    )
    assert followed.status_code == 200 and 'src="/console/app.js"' in followed.text
