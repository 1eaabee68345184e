"""The files `sam build` and users' installs rely on agree with each other (fast checks; the
real builds and installs are the `deploy` tests)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from cirrusmq_local.cfn_yaml import load_yaml

ROOT = Path(__file__).resolve().parents[2]
# Lambda's python3.11 is Amazon Linux 2 (glibc 2.26): pyarrow's newest manylinux2014 aarch64
# wheels are 20.0.0, while the tests run the newest pyarrow.
LAYER_ONLY_PINS = {"pyarrow"}


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if match := re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line):
            pins[match[1].lower().replace("_", "-")] = match[2]
    return pins


def test_the_dependencies_layer_is_pinned_to_the_tested_versions() -> None:
    layer = _pins(ROOT / "layers" / "deps" / "requirements.txt")
    tested = _pins(ROOT / "constraints.txt")
    requirements = (ROOT / "layers" / "deps" / "requirements.txt").read_text().splitlines()
    assert all("==" in line for line in requirements if line.strip() and not line.startswith("#"))
    for name, version in layer.items():
        if name not in LAYER_ONLY_PINS:
            assert tested.get(name) == version, (
                f"{name}: layer {version}, tested {tested.get(name)}"
            )


def test_the_dependencies_layer_builds_with_its_makefile() -> None:
    template = load_yaml(ROOT / "template.yaml")
    layer = template["Resources"]["DependenciesLayer"]
    assert layer["Metadata"]["BuildMethod"] == "makefile"
    makefile = (ROOT / layer["Properties"]["ContentUri"] / "Makefile").read_text()
    assert re.search(r"^build-DependenciesLayer:", makefile, re.M)
    assert "--platform $(PLATFORM)" in makefile and "--only-binary=:all:" in makefile
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::LayerVersion":
            assert resource["Properties"]["CompatibleArchitectures"] == ["arm64"], name
    assert template["Globals"]["Function"]["Architectures"] == ["arm64"]


def test_the_sdk_alone_needs_no_broker_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not names & {"boto3", "botocore", "moto", "pyarrow", "aws-lambda-powertools"}
