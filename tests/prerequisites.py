"""What the suite needs besides the venv, checked once as the run starts.

The console tests drive the system's ``chromium``; the README's curl walkthrough runs
``curl``, ``openssl`` and ``jq``; the Spark tests start a JVM (Spark 4 needs
Java 17 or newer). A run that selects them on a machine without them stops at once with one
line per missing program and the command that installs it, instead of failing each test (or
Spark's ``JAVA_GATEWAY_EXITED``) minutes later; nothing is skipped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Missing", "java_major", "missing_prerequisites", "needs"]

TESTS = Path(__file__).resolve().parent
MIN_JAVA = 17


@dataclass(frozen=True)
class Missing:
    """A program the selected tests need and this machine lacks."""

    program: str
    needed_by: str
    """The test folder that needs it."""
    install: str
    """The command that installs it (Debian / Ubuntu)."""
    found: str = "not found"
    """What was found instead (e.g. an older Java)."""

    def line(self) -> str:
        return f"{self.needed_by} need {self.program} ({self.found}): {self.install}"


CHROMIUM = Missing("chromium", "tests/console", "sudo apt-get install -y chromium")
README_TOOLS = ("curl", "openssl", "jq")
"""What the README's curl walkthrough (tests/integration/test_readme_curl.py) runs."""
JAVA = Missing(
    f"a JDK {MIN_JAVA}+ for Spark",
    "tests/spark",
    f"sudo apt-get install -y openjdk-{MIN_JAVA}-jdk-headless (or set JAVA_HOME to one)",
)


def needs(args: Iterable[str], folder: str) -> bool:
    """Whether the command line's test paths (none: the whole ``tests``) select any test of
    ``tests/<folder>``."""
    target = TESTS / folder
    paths = [a.split("::", 1)[0] for a in args if not a.startswith("-")]
    if not paths:
        return True
    for text in paths:
        path = Path(text).resolve()
        if path == target or target in path.parents or path in target.parents:
            return True
    return False


def java_major(java: str, *, env: Mapping[str, str] | None = None) -> int | None:
    """The major version ``java -version`` states (8 for ``1.8.0``); None if it does not run."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, env=env
        )
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if match is None:
        return None
    major = int(match[1])
    return int(match[2] or 0) if major == 1 else major


def _java(env: Mapping[str, str]) -> str | None:
    """The ``java`` Spark starts: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = env.get("JAVA_HOME")
    if home:
        return str(Path(home) / "bin" / "java")
    return shutil.which("java", path=env.get("PATH"))


def missing_prerequisites(
    args: Iterable[str], env: Mapping[str, str] | None = None
) -> list[Missing]:
    """The programs the tests selected by ``args`` need and ``env``'s PATH lacks."""
    env = os.environ if env is None else env
    args = list(args)
    missing = []
    if needs(args, "console") and shutil.which("chromium", path=env.get("PATH")) is None:
        missing.append(CHROMIUM)
    if needs(args, "integration"):
        for tool in README_TOOLS:
            if shutil.which(tool, path=env.get("PATH")) is None:
                missing.append(
                    Missing(tool, "tests/integration", f"sudo apt-get install -y {tool}")
                )
    if needs(args, "spark"):
        java = _java(env)
        major = None if java is None else java_major(java, env=dict(env))
        if major is None or major < MIN_JAVA:
            found = "not found" if major is None else f"found Java {major} at {java}"
            missing.append(Missing(JAVA.program, JAVA.needed_by, JAVA.install, found))
    return missing
