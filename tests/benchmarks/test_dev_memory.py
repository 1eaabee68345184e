"""dev_memory.py's ``--data-dir``: a tiny run reports the folder and restarts on it."""

from __future__ import annotations

from pathlib import Path

import dev_memory
import pytest
from cirrusmq_broker import clock


def test_data_dir_run_reports_the_folder_and_restarts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    dev_memory.main(
        ["--hours", "0.5", "--step-minutes", "15", "--sends", "1", "--batch", "5"]
        + ["--report-hours", "0.25", "--data-dir", str(data)]
    )
    out = capsys.readouterr().out
    assert "jrnl MiB" in out and "snap MiB" in out
    assert "restart:" in out and "topics kept: day" in out
    assert (data / "moto" / "snapshot.pickle").stat().st_size > 0


def test_a_run_signs_on_a_broker_clock_already_advanced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The broker clock is one per process: another stack (or test) may have moved it on."""
    clock.advance(3600)
    try:
        dev_memory.main(["--hours", "0.25", "--step-minutes", "15", "--sends", "1", "--batch", "2"])
    finally:
        clock.reset()
    assert "sim h" in capsys.readouterr().out
