"""Installed the way users install it: ``pip install '.[local]'`` / ``'.[dev]'`` into fresh
venvs WITHOUT constraints.txt (must resolve within minutes), the SDK alone without boto3,
moto or pyarrow, and the wheel ``python -m build`` makes, with a working ``cirrusmq``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
import venv
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.deploy

INSTALL_TIMEOUT_SECONDS = 900
"""A hang guard, not a figure: ~45 s measured each (README); a backtracking pip took > 6 min
for [dev] and ran on past this."""
HEAVY = {"boto3", "botocore", "moto", "pyarrow"}


def _venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def _run(*args: str | Path, cwd: Path | None = None, timeout: float = 600, **kw) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_CONSTRAINT")}
    env = {k: v for k, v in env.items() if not k.startswith("CIRRUSMQ_")} | kw.pop("env", {})
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _installed(python: Path) -> set[str]:
    out = _run(python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check")
    return {line.split("==")[0].lower() for line in out.splitlines() if "==" in line}


def _timed_install(python: Path, spec: str) -> float:
    started = time.monotonic()
    _run(
        python,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        spec,
        timeout=INSTALL_TIMEOUT_SECONDS,
    )
    return time.monotonic() - started


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout to install from: pip builds in the source tree (build/,
    *.egg-info), which must not leave anything in the repository."""
    copy = tmp_path_factory.mktemp("src") / "cirrusmq"
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", ".aws-sam", "build", "dist", "*.egg-info", "__pycache__", ".*cache",
        ".hypothesis",
    )  # fmt: skip
    shutil.copytree(ROOT, copy, ignore=ignore)
    return copy


@pytest.fixture(scope="module")
def wheel(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build``: an sdist, and a wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    tools = _venv(tmp_path_factory.mktemp("build-venv"))
    _run(tools, "-m", "pip", "install", "--quiet", "build")
    _run(tools, "-m", "build", "--outdir", out, source, timeout=600)
    assert len(list(out.glob("cirrusmq-*.tar.gz"))) == 1
    (wheel,) = out.glob("cirrusmq-*-py3-none-any.whl")
    return wheel


@pytest.mark.parametrize("extra", ["local", "dev"])
def test_extras_install_without_constraints_within_minutes(
    extra: str, source: Path, tmp_path: Path
) -> None:
    python = _venv(tmp_path / "venv")
    elapsed = _timed_install(python, f"{source}[{extra}]")
    print(f"\npip install '.[{extra}]' (no constraints): {elapsed:.1f} s")
    assert _installed(python) >= HEAVY
    _run(python, "-c", "import cirrusmq_local, cirrusmq_broker, cirrusmq_api, moto, pyarrow")
    if extra == "local":  # from an install, not a checkout: the bundled template and functions
        _check_local_stack_from_an_install(python, tmp_path)


def _check_local_stack_from_an_install(python: Path, tmp_path: Path) -> None:
    bin_dir = python.parent
    env = {"CIRRUSMQ_CONFIG": str(tmp_path / "config"), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [bin_dir / "cirrusmq", "dev", "--port", "0", "--no-schedules"],
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if line.startswith("Press Ctrl-C") or process.poll() is not None:
                break
        banner = "".join(lines)
        assert "site-packages/cirrusmq_local/stack/template.yaml" in banner, banner
        _run(bin_dir / "cirrusmq", "topic", "create", "orders", cwd=tmp_path, env=env)
        assert "orders" in _run(bin_dir / "cirrusmq", "topic", "list", cwd=tmp_path, env=env)
    finally:
        process.terminate()
        process.wait(30)


def test_the_sdk_alone_pulls_no_broker_dependencies(wheel: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    elapsed = _timed_install(python, str(wheel))
    print(f"\npip install cirrusmq wheel (SDK only): {elapsed:.1f} s")
    assert not HEAVY & _installed(python)
    cli = python.parent / "cirrusmq"
    assert re.fullmatch(r"cirrusmq \d+\.\d+\.\d+\S*\n", _run(cli, "--version"))
    assert "topic" in _run(cli, "--help")
    _run(python, "-c", "from cirrusmq import Admin, Producer, SimpleConsumer, Credentials")
    # the local stack says what is missing instead of a traceback
    result = subprocess.run([cli, "dev"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "cirrusmq[local]" in result.stdout + result.stderr


def test_the_wheel_carries_the_template_and_functions(wheel: Path) -> None:
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    assert "cirrusmq_local/stack/template.yaml" in names
    for function in ("admin", "produce", "consume", "janitor"):
        assert f"cirrusmq_local/stack/functions/{function}/app.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)
