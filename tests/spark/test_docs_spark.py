"""The Spark snippets of the README and docs/spark.md (``<!-- snippet: spark -->``) run in
order on the session's Spark, against a fresh local stack whose ``local`` profile was written
as ``cirrusmq dev`` writes it: ``options_from_profile("local")`` is how they find it."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cirrusmq import Admin, Message, Producer
from cirrusmq.cli import write_local_profile
from cirrusmq.testing import LocalStack

_HELPER = Path(__file__).resolve().parents[1] / "integration" / "docs_snippets.py"


def _docs_snippets() -> Any:
    """tests/integration/docs_snippets.py (the extraction and the markers)."""
    spec = importlib.util.spec_from_file_location("docs_snippets", _HELPER)
    assert spec is not None and spec.loader is not None
    if spec.name in sys.modules:
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fresh_stack() -> Iterator[LocalStack]:
    with LocalStack(schedules=False) as stack:
        yield stack


def test_the_spark_snippets_run_in_order(spark, fresh_stack, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    assert write_local_profile(fresh_stack) is not None  # what `cirrusmq dev` does
    with Admin(fresh_stack.endpoint, fresh_stack.credentials) as admin:  # the README's topic
        admin.create_topic("orders", queues=8)
    with Producer(fresh_stack.endpoint, fresh_stack.credentials) as producer:
        producer.send_batch([Message("orders", f"m{i}", tag="TagA") for i in range(3)])

    docs = _docs_snippets()
    chosen = [s for s in docs.in_reader_order() if s.how == "spark"]
    assert [s.doc for s in chosen] == ["README.md", "docs/spark.md"]
    namespace: dict[str, Any] = {"__name__": "__docs__", "spark": spark}
    for snippet in chosen:
        exec(snippet.compiled(), namespace)  # noqa: S102 - the docs' own code
        assert namespace["df"].count() == 3, snippet.where
