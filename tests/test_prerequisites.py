"""The run stops at its start, with the install command, when a program the selected tests
need is missing (tests/prerequisites.py, checked in tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from prerequisites import TESTS, java_major, missing_prerequisites, needs


def _fake_java(folder: Path, version: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2021-01-19' >&2\n")
    java.chmod(0o755)
    return java


def test_the_paths_on_the_command_line_decide_what_is_needed():
    assert needs([], "console")
    assert needs(["-q", str(TESTS)], "spark")
    assert needs([f"{TESTS}/console/test_console_static.py::test_x"], "console")
    assert not needs([str(TESTS / "broker")], "console")


def test_an_old_java_and_a_missing_chromium_are_named_with_their_install_command(tmp_path):
    home = tmp_path / "jdk11"
    java = _fake_java(home, "11.0.2")
    assert java_major(str(java)) == 11
    env = {"PATH": str(tmp_path / "empty"), "JAVA_HOME": str(home)}
    lines = [m.line() for m in missing_prerequisites([], env)]
    assert lines == [
        "tests/console need chromium (not found): sudo apt-get install -y chromium",
        "tests/integration need curl (not found): sudo apt-get install -y curl",
        "tests/integration need openssl (not found): sudo apt-get install -y openssl",
        "tests/integration need jq (not found): sudo apt-get install -y jq",
        f"tests/spark need a JDK 17+ for Spark (found Java 11 at {java}): "
        "sudo apt-get install -y openjdk-17-jdk-headless (or set JAVA_HOME to one)",
    ]
    assert missing_prerequisites([str(TESTS / "broker")], env) == []


def test_java_8_reads_as_8(tmp_path):
    assert java_major(str(_fake_java(tmp_path, "1.8.0_292"))) == 8


def test_a_run_without_chromium_stops_before_any_test_with_the_install_command(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # no chromium (and no java) on it
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", str(TESTS / "console")],
        cwd=TESTS.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "sudo apt-get install -y chromium" in output
    assert "passed" not in output and "failed" not in output  # no test ran
