"""request_cpu.py on a real local stack, at a size that runs in seconds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_it_prints_a_row_per_batch_size_with_the_collectors_share() -> None:
    done = subprocess.run(
        [sys.executable, str(HERE / "request_cpu.py"), "--batches", "1,5", "--requests", "2"]
        + ["--freeze-after-warm-up"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = [line for line in done.stdout.splitlines() if line.lstrip()[:1].isdigit()]
    assert [row.split("|")[0].strip() for row in rows] == ["1", "5"]
    assert all(row.rstrip().endswith("%") for row in rows)
