"""Cold import time of each Lambda handler from the `sam build` artifacts, and their sizes.

    make sam-build                                   # .aws-sam/build (no Docker)
    .venv/bin/python tests/benchmarks/cold_imports.py [--build-dir .aws-sam/build] [--runs 7]

Each run imports one handler module (``app``) in a fresh interpreter (``-I -S``: no
site-packages) whose path is what Lambda's is: the function's code, then the layers
(BrokerLayer, ApiLayer, DependenciesLayer ``python/``), then the runtime's own boto3. It
prints the median and best time over ``--runs`` runs and whether pyarrow / pydantic were
imported, then each artifact's size unzipped and zipped.

The built DependenciesLayer is arm64; on another machine its native modules cannot load, so
the same pinned requirements are installed for this machine's platform by the same Makefile
(``PLATFORM=manylinux2014_<machine>``) and measured instead (said in the output). boto3 and
what it needs come from this interpreter (Lambda's runtime provides them, outside layers).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ("AdminFunction", "ProduceFunction", "ConsumeFunction", "JanitorFunction")
LAYERS = ("BrokerLayer", "ApiLayer", "DependenciesLayer")
RUNTIME_MODULES = ("boto3", "botocore", "s3transfer", "dateutil", "six", "urllib3")
ENVIRONMENT = {
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "x",
    "AWS_SECRET_ACCESS_KEY": "x",
    "POWERTOOLS_SERVICE_NAME": "cirrusmq",
    "CIRRUSMQ_TOPICS_TABLE": "topics",
    "CIRRUSMQ_LOG_INDEX_TABLE": "log-index",
    "CIRRUSMQ_QUEUE_HEADS_TABLE": "queue-heads",
    "CIRRUSMQ_GROUPS_TABLE": "groups",
    "CIRRUSMQ_PRODUCERS_TABLE": "producers",
    "CIRRUSMQ_BUCKET": "bucket",
    "CIRRUSMQ_RECEIPT_SECRET": "x" * 32,
    "CIRRUSMQ_ORPHAN_GRACE_SECONDS": "300",
}
PROBE = """
import json, os, sys, time
sys.path[:0] = json.loads(os.environ["COLD_PATH"])
started = time.perf_counter()
import app
elapsed = time.perf_counter() - started
report = {"seconds": elapsed, "modules": len(sys.modules)}
report.update({m: m in sys.modules for m in ("pyarrow", "pydantic", "boto3")})
print(json.dumps(report), flush=True)
os._exit(0)  # skip interpreter teardown (pyarrow 20 can abort in it; Lambda never runs it)
"""


def human(size: float) -> str:
    return f"{size / 2**20:.1f} MiB" if size >= 2**20 else f"{size / 2**10:.1f} KiB"


def tree_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def zipped_size(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        return Path(shutil.make_archive(str(Path(tmp) / "a"), "zip", path)).stat().st_size


def is_native_here(layer: Path) -> bool:
    probe = next(layer.rglob("pyarrow/lib.cpython-*.so"), None)
    return probe is None or platform.machine() in probe.name


def host_dependencies(tmp: Path) -> Path:
    machine = platform.machine()
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-s",
            "-C",
            str(ROOT / "layers" / "deps"),
            "build-DependenciesLayer",
            f"ARTIFACTS_DIR={tmp}",
            f"PLATFORM=manylinux2014_{machine}",
            f"PYTHON={sys.executable}",
        ],
        check=True,
    )
    return tmp


def runtime_dir(tmp: Path) -> Path:
    """boto3 and its dependencies, as Lambda's runtime has them (links to this interpreter's)."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (tmp / source.name).symlink_to(source)
    return tmp


def measure(function_dir: Path, path: list[str], runs: int) -> list[dict]:
    env = {"PATH": os.environ.get("PATH", ""), **ENVIRONMENT}
    env["COLD_PATH"] = json.dumps([str(function_dir), *path])
    results = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-c", PROBE],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=function_dir,
        )
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / ".aws-sam" / "build")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    build = args.build_dir
    if not (build / "DependenciesLayer").is_dir():
        sys.exit(f"no sam build output in {build}: run `make sam-build` (or pass --build-dir)")

    print(f"artifact sizes ({build}):")
    sizes = {}
    for name in (*LAYERS, *FUNCTIONS):
        sizes[name] = tree_size(build / name)
        zipped = zipped_size(build / name)
        print(f"  {name:<18} {human(sizes[name]):>10} unzipped {human(zipped):>10} zipped")
    layers = sum(sizes[n] for n in LAYERS)
    for name in FUNCTIONS:
        total = human(sizes[name] + layers)
        print(f"  {name:<18} with its layers: {total} unzipped (Lambda's limit: 250 MiB)")

    with tempfile.TemporaryDirectory(prefix="cirrusmq-cold-") as tmp:
        deps = build / "DependenciesLayer"
        if not is_native_here(deps):
            print(
                f"\nDependenciesLayer is arm64; importing the same pins built for "
                f"{platform.machine()} (layers/deps/Makefile PLATFORM=manylinux2014_"
                f"{platform.machine()})"
            )
            deps = host_dependencies(Path(tmp) / "deps")
        path = [
            str(build / "BrokerLayer" / "python"),
            str(build / "ApiLayer" / "python"),
            str(deps / "python"),
            str(runtime_dir(Path(tmp) / "runtime")),
        ]
        print(
            f"\ncold import of each handler ({args.runs} fresh interpreters, python "
            f"{platform.python_version()}, {platform.machine()}):"
        )
        print(f"  {'function':<18} {'median ms':>10} {'best ms':>8}  pyarrow pydantic modules")
        for name in FUNCTIONS:
            results = measure(build / name, path, args.runs)
            times = [r["seconds"] * 1000 for r in results]
            last = results[-1]
            print(
                f"  {name:<18} {statistics.median(times):10.0f} {min(times):8.0f}  "
                f"{'yes' if last['pyarrow'] else 'no':>7} {'yes' if last['pydantic'] else 'no':>8}"
                f" {last['modules']:>7}"
            )


if __name__ == "__main__":
    main()
