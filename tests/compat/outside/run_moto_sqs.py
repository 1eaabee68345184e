"""Run moto's AWS-verified SQS tests, unmodified, against a fresh CirrusMQ local stack.

``make test-compat`` calls this with the unpacked moto source distribution and one Python per
protocol: the project's venv (botocore 1.40, AWS JSON 1.0) and a venv with botocore 1.31.80
(the query protocol). One local stack serves both runs; each run's boto3 clients reach it
through ``AWS_ENDPOINT_URL_SQS`` and sign with its admin key. Prints the pass/fail counts of
each run (JUnit XML next to the suite) and exits non-zero if a test failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from cirrusmq.testing import LocalStack

HERE = Path(__file__).resolve().parent
TEST_DIR = "tests/test_sqs"
RUN_TIMEOUT_S = 900
CLEARED = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def _environment(stack: LocalStack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(
        AWS_ENDPOINT_URL_SQS=stack.endpoint,
        CIRRUSMQ_COMPAT_STACK=stack.endpoint,
        AWS_ACCESS_KEY_ID=stack.credentials.access_key,
        AWS_SECRET_ACCESS_KEY=stack.credentials.secret_key,
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        MOTO_TEST_ALLOW_AWS_REQUEST="true",
    )
    return env


def _counts(report: Path) -> dict[str, int]:
    if not report.is_file():  # pytest stopped before writing it: the run counts as failed
        return {"tests": 0, "passed": 0, "failed": 1, "skipped": 0}
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None
    total = int(suite.get("tests", 0))
    failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
    skipped = int(suite.get("skipped", 0))
    passed = total - failed - skipped
    return {"tests": total, "passed": passed, "failed": failed, "skipped": skipped}


def run(suite: Path, label: str, python: str, stack: LocalStack, extra: list[str]) -> dict:
    """One pytest run of the suite's AWS-verified SQS tests with ``python``."""
    report = suite.parent / f"moto-sqs-{label}.xml"
    report.unlink(missing_ok=True)
    command = [
        python, "-m", "pytest", TEST_DIR, "-m", "aws_verified",
        "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:cirrusmq",
        "--timeout", "120", "-rfE", "--color=no", "--tb=short",
        f"--junitxml={report}", *extra,
    ]  # fmt: skip
    print(f"\n=== moto SQS suite, {label}: {' '.join(command)}", flush=True)
    subprocess.run(command, cwd=suite, env=_environment(stack), timeout=RUN_TIMEOUT_S, check=False)
    return _counts(report)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("suite", type=Path, help="the unpacked moto source distribution")
    parser.add_argument(
        "--python", action="append", default=[], metavar="LABEL=PYTHON",
        help="a protocol's run: its label and the Python (with pytest, moto, boto3) to run it",
    )  # fmt: skip
    args, pytest_args = parser.parse_known_args()  # the rest goes to pytest (make ARGS=...)
    shutil.copyfile(HERE / "moto_sqs_conftest.py", args.suite / TEST_DIR / "conftest.py")
    runs = [spec.split("=", 1) for spec in args.python] or [["json", sys.executable]]
    results = {}
    with LocalStack(schedules=False) as stack:
        for label, python in runs:
            results[label] = run(args.suite.resolve(), label, python, stack, pytest_args)
    print("\n=== moto SQS suite (aws_verified) against CirrusMQ")
    for label, counts in results.items():
        print(f"{label:>6}: {counts['passed']}/{counts['tests']} passed, {counts['failed']} failed")
    return 0 if all(c["failed"] == 0 and c["tests"] > 0 for c in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
