"""The documented examples run in the order a reader meets them, on one fresh local stack.

What a new user does: start the stack (``make dev`` writes the ``local`` profile), run the
README's curl block, then paste the Python snippets of the README, docs/sdk.md and
docs/transactions.md into one Python session, one after the other. Only the endpoint and the
secret key are substituted (the snippets say ``"http://127.0.0.1:8080"`` and
``Credentials("local-admin", "...")``); the names a snippet leaves to the reader's own code
(``handle``, ``process``, ...) are stand-ins. How each snippet runs is in docs_snippets.py;
the Spark ones run in tests/spark/test_docs_spark.py.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from cirrusmq import Credentials, signing
from cirrusmq.cli import write_local_profile
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock
from docs_snippets import READER_ORDER, ROOT, Snippet, in_reader_order, snippets
from test_readme_curl import run_readme_block

ENDPOINT = '"http://127.0.0.1:8080"'
SECRET = 'Credentials("local-admin", "...")'

EXPECTED = {
    "README.md": {"run": 1, "own-process": 1, "spark": 1, "skip": 1},
    "docs/sdk.md": {"run": 10, "skip": 4},
    "docs/transactions.md": {"run": 3},
    "docs/spark.md": {"spark": 1, "skip": 4},
    "docs/deploy.md": {"skip": 1},
    "docs/compat.md": {"skip": 3},
}
"""Snippets per page and kind: a snippet added, removed or marked differently shows here."""


class ReaderCode:
    """Stand-ins for the functions the snippets leave to the reader; records their calls."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def names(self) -> dict[str, Any]:
        def stand_in(name: str, result: Any = None):
            def call(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] += 1
                return result

            return call

        return {
            "handle": stand_in("handle"),
            "process": stand_in("process"),
            "order_paid": stand_in("order_paid", True),
            "charge_card": stand_in("charge_card"),
            "store_somewhere_safe": stand_in("store_somewhere_safe"),
        }


@pytest.fixture(scope="module")
def fresh_stack() -> Iterator[LocalStack]:
    """A stack of its own, as ``make dev`` starts it: nothing in it yet."""
    credentials = Credentials("local-admin", secrets.token_urlsafe(30))
    with LocalStack(schedules=False, credentials=credentials) as stack:
        yield stack


class _StackTime:
    """Stands in for :mod:`time` in the signer: the seconds of the local stacks' clock."""

    @staticmethod
    def time() -> float:
        return clock.now_ms() / 1000


def _substituted(snippet: Snippet, stack: LocalStack) -> str:
    return snippet.code.replace(ENDPOINT, repr(stack.endpoint)).replace(
        SECRET, f"Credentials('local-admin', {stack.credentials.secret_key!r})"
    )


def _run_own_process(snippet: Snippet, tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", snippet.code],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={**os.environ},
    )
    assert result.returncode == 0, f"{snippet.where}\n{result.stdout}\n{result.stderr}"


def test_the_markers_are_as_expected() -> None:
    counts = {doc: dict(Counter(s.how for s in snippets(doc))) for doc in READER_ORDER}
    assert counts == EXPECTED


def test_every_page_with_python_snippets_is_read() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    with_python = {str(p.relative_to(ROOT)) for p in pages if "```python" in p.read_text()}
    assert with_python <= set(READER_ORDER)


@pytest.mark.skipif(
    shutil.which("curl") is None or shutil.which("openssl") is None, reason="needs curl, openssl"
)
def test_the_docs_run_in_order_on_one_fresh_stack(fresh_stack, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    for name in ("CIRRUSMQ_ENDPOINT", "CIRRUSMQ_ACCESS_KEY", "CIRRUSMQ_SECRET_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    monkeypatch.chdir(tmp_path)  # snippets write outbox.db and offsets where they run
    # The reader's machine keeps its clock in sync with the service's (docs/sdk.md). This
    # process's broker clock is shared by every stack in it and may have been advanced by an
    # earlier test: the snippets sign on it, as the README block's `date` does.
    monkeypatch.setattr(signing, "time", _StackTime())
    assert write_local_profile(fresh_stack) is not None  # what `cirrusmq dev` does

    run_readme_block(fresh_stack, tmp_path)  # "Try it over HTTP" comes first
    reader = ReaderCode()
    namespace: dict[str, Any] = {"__name__": "__docs__", **reader.names()}
    ran: Counter[str] = Counter()
    substitutions = Counter()
    for snippet in in_reader_order():
        if snippet.how == "own-process":
            _run_own_process(snippet, tmp_path)
        elif snippet.how == "run":
            code = _substituted(snippet, fresh_stack)
            substitutions["endpoint"] += snippet.code.count(ENDPOINT)
            substitutions["secret"] += snippet.code.count(SECRET)
            exec(snippet.compiled(code), namespace)  # noqa: S102 - the docs' own code
        else:
            continue
        ran[snippet.doc] += 1
    expected = {
        doc: kinds.get("run", 0) + kinds.get("own-process", 0) for doc, kinds in EXPECTED.items()
    }
    assert ran == +Counter(expected)  # (+ drops the pages with none)
    assert substitutions == {"endpoint": 2, "secret": 2}

    namespace["test_orders"](fresh_stack)  # sdk.md's example test, with the stack as fixture
    used = {name for s in in_reader_order() for name in reader.names() if name in s.code}
    assert used == set(reader.names())  # every stand-in stands for something a snippet uses
    assert reader.calls["handle"] and reader.calls["process"], reader.calls  # messages came
