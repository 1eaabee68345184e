"""The test session never uses the user's home (tests/conftest.py)."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from cirrusmq.config import default_config_path


def test_home_and_the_profile_file_are_the_sessions_own():
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    assert Path.home() != real_home
    assert Path(os.environ["HOME"]).name.startswith("cirrusmq-test-home-")
    assert default_config_path().is_relative_to(Path.home())
