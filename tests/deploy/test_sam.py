"""``sam build`` (no Docker) and ``sam validate --lint`` on template.yaml as it is, and the
built artifacts: arm64 wheels Lambda's python3.11 (Amazon Linux 2) can load, within 250 MB."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.deploy

LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024
GLIBC_OF_AMAZON_LINUX_2 = (2, 26)
LAYERS = ("BrokerLayer", "ApiLayer", "DependenciesLayer")
FUNCTIONS = ("AdminFunction", "ProduceFunction", "ConsumeFunction", "JanitorFunction")


def _env() -> dict[str, str]:
    env = dict(os.environ, SAM_CLI_TELEMETRY="0")
    env.setdefault("PYTHON", sys.executable)  # layers/deps/Makefile: a Python with pip
    return env


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="module")
def built(sam: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    build_dir = tmp_path_factory.mktemp("sam") / "build"
    result = subprocess.run(
        [sam, "build", "--build-dir", str(build_dir)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0 and "Build Succeeded" in result.stdout, (
        result.stdout[-4000:] + result.stderr[-4000:]
    )
    return build_dir


def test_sam_validate_lint(sam: str) -> None:
    result = subprocess.run(
        [sam, "validate", "--lint", "--region", "us-east-1"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_sam_build_makes_every_layer_and_function(built: Path) -> None:
    for name in FUNCTIONS:
        assert (built / name / "app.py").is_file()
    assert (built / "BrokerLayer" / "python" / "cirrusmq_broker" / "codec.py").is_file()
    assert (built / "ApiLayer" / "python" / "cirrusmq_api" / "app.py").is_file()
    assert (built / "DependenciesLayer" / "python" / "aws_lambda_powertools").is_dir()


def test_binary_wheels_are_for_lambda_arm64_python_3_11(built: Path) -> None:
    deps = built / "DependenciesLayer" / "python"
    assert (deps / "pyarrow" / "lib.cpython-311-aarch64-linux-gnu.so").is_file()
    assert list((deps / "pydantic_core").glob("_pydantic_core.cpython-311-aarch64-linux-gnu.so"))
    libraries = [p for p in deps.rglob("*.so*") if p.is_file()]
    assert libraries
    newest = (0, 0)
    for library in libraries:
        data = library.read_bytes()
        assert data[:4] == b"\x7fELF" and data[18:20] == b"\xb7\x00", f"{library}: not aarch64"
        for major, minor in re.findall(rb"GLIBC_(\d+)\.(\d+)", data):
            newest = max(newest, (int(major), int(minor)))
    assert newest <= GLIBC_OF_AMAZON_LINUX_2, f"needs glibc {newest}: not on Amazon Linux 2"


def test_artifacts_fit_lambda_limits(built: Path) -> None:
    sizes = {name: size(built / name) for name in (*LAYERS, *FUNCTIONS)}
    layers = sum(sizes[name] for name in LAYERS)
    report = ", ".join(f"{name} {value / 2**20:.1f} MiB" for name, value in sizes.items())
    print(f"\nsam build artifacts (unzipped): {report}")
    for name in FUNCTIONS:
        total = sizes[name] + layers
        assert total < LAMBDA_UNZIPPED_LIMIT, f"{name} with its layers: {total / 2**20:.0f} MiB"
