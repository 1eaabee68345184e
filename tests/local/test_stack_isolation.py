"""A test that fails inside a local stack of its own, never stopping it, leaves the tests
after it on its worker green: the session stack's handlers keep reading their own stack's
configuration. Proved in a pytest run of its own (pytest-xdist, one worker), as `make test`
runs the suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

NEIGHBOURS = textwrap.dedent(
    """
    from cirrusmq import Admin
    from cirrusmq.testing import LocalStack


    def admin(stack):
        return Admin(stack.endpoint, stack.credentials, request_timeout_s=60)


    def test_before(cirrusmq_stack):
        with admin(cirrusmq_stack) as a:
            a.create_topic("before")


    def test_fails_inside_a_stack_it_never_stops():
        LocalStack(schedules=False, expire_interval=None).start()
        raise AssertionError("failing on purpose, the stack left running")


    def test_after(cirrusmq_stack):
        with admin(cirrusmq_stack) as a:
            assert "before" in [t.name for t in a.list_topics()]
            a.create_topic("after")
            assert {"before", "after"} <= {t.name for t in a.list_topics()}
    """
)


def test_a_failing_test_that_leaks_a_stack_leaves_its_neighbours_green(tmp_path: Path) -> None:
    (tmp_path / "test_neighbours.py").write_text(NEIGHBOURS)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "1",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_neighbours.py"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    summary = run.stdout.strip().splitlines()[-1]
    assert "1 failed, 2 passed" in summary, run.stdout[-3000:]
    assert "failing on purpose" in run.stdout
