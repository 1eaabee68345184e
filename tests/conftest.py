"""Session-wide isolation: no test reads or writes the user's home.

``HOME`` and ``CIRRUSMQ_CONFIG`` point into a temporary folder for the whole run, in every
pytest-xdist worker and in every process a test starts (they inherit the environment), so
nothing the suite does — ``cirrusmq dev`` writing its ``local`` profile, offset stores, the
CLI — can replace the profile of a ``make dev`` the user has running. pip keeps its download
cache where it was (a cache, not the user's settings), so the deploy tests stay fast.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from prerequisites import missing_prerequisites

_HOME = "CIRRUSMQ_TEST_HOME"


def pytest_configure(config: pytest.Config) -> None:
    # the controller checks, before workers start; `-m deploy` / `-m serial` (make
    # test-deploy, the second phase of make test) select neither browser nor Spark tests
    only_marked = config.option.markexpr.strip() in {"deploy", "serial"}
    if not hasattr(config, "workerinput") and not only_marked:
        missing = missing_prerequisites(config.args)
        if missing:
            raise pytest.UsageError(
                "missing prerequisites (README, Two commands):\n"
                + "\n".join(f"  {m.line()}" for m in missing)
            )
    os.environ.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    home = Path(tempfile.mkdtemp(prefix="cirrusmq-test-home-"))
    os.environ[_HOME] = str(home)
    os.environ["HOME"] = str(home)
    os.environ["CIRRUSMQ_CONFIG"] = str(home / ".cirrusmq" / "config")


def pytest_unconfigure(config: pytest.Config) -> None:
    home = os.environ.get(_HOME)
    if home:
        shutil.rmtree(home, ignore_errors=True)
