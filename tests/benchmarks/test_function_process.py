"""function_process.py: the front door in a process of its own freezes what it holds only
when it looks like a Lambda process."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.parametrize(("flags", "freezes"), [([], True), (["--not-lambda"], False)])
def test_a_lambda_process_freezes_after_its_first_requests(flags: list[str], freezes: bool) -> None:
    done = subprocess.run(
        [sys.executable, str(HERE / "function_process.py"), "--batch", "5", "--requests", "2"]
        + flags,
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    )
    frozen = int(re.search(r"frozen (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    assert (frozen > 0) is freezes, done.stdout
    assert "the three, mean" in done.stdout
