"""Tests of what users deploy: template.yaml and docs/deploy.md (fast, in the default run), and
the ways users install and deploy (marker ``deploy``; not in the default run):
``make test-deploy`` installs what they need (aws-sam-cli in ``.venv-sam``) and runs them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _required() -> bool:
    return os.environ.get("CIRRUSMQ_REQUIRE_DEPLOY_TOOLS") == "1"


@pytest.fixture(scope="session")
def sam() -> str:
    """The ``sam`` command: ``$CIRRUSMQ_SAM``, ``.venv-sam/bin/sam`` (``make test-deploy``
    installs it there), or ``sam`` on PATH. Missing: skipped, or failed under
    ``CIRRUSMQ_REQUIRE_DEPLOY_TOOLS=1`` (CI)."""
    for candidate in (
        os.environ.get("CIRRUSMQ_SAM"),
        str(ROOT / ".venv-sam" / "bin" / "sam"),
        shutil.which("sam"),
    ):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    message = "aws-sam-cli not found (make test-deploy installs it into .venv-sam)"
    if _required():
        pytest.fail(message)
    pytest.skip(message)
