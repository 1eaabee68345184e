"""Run LocalStack's vendored SQS tests, unmodified, against a fresh CirrusMQ local stack.

``make test-compat`` calls this with the Python of ``.venv-localstack-suite`` (localstack-core,
localstack-snapshot and pytest, pinned in ``localstack/requirements.txt``). It starts one local
stack, runs pytest in ``localstack/`` with LocalStack's testing settings pointing at the stack
(``localstack/conftest.py`` builds the clients and applies ``localstack/applicable.txt``), and
prints "N of M applicable pass" from the JUnit XML. The suite's tests run each protocol
themselves (``aws_sqs_client`` is parametrized over ``sqs`` and ``sqs_query``). Exits non-zero
if fewer than all applicable tests pass, unless ``--allow-failures`` is given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from cirrusmq.testing import LocalStack

SUITE = Path(__file__).resolve().parent / "localstack"
RUN_TIMEOUT_S = 1500
CLEARED = ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


def _environment(stack: LocalStack) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED and not k.startswith("TEST_")}
    env.update(
        CIRRUSMQ_COMPAT_STACK=stack.endpoint,
        TEST_AWS_ENDPOINT_URL=stack.endpoint,
        TEST_AWS_ACCESS_KEY_ID=stack.credentials.access_key,
        TEST_AWS_SECRET_ACCESS_KEY=stack.credentials.secret_key,
        TEST_AWS_ACCOUNT_ID="000000000000",
        TEST_AWS_REGION_NAME="us-east-1",
        TEST_SKIP_LOCALSTACK_START="1",
        AWS_CONFIG_FILE=os.devnull,
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
    )
    return env


def _results(report: Path) -> tuple[int, int, int, list[str]]:
    """(run, passed, skipped, failed node ids) of the JUnit XML ``report``."""
    if not report.is_file():  # pytest stopped before writing it
        return 0, 0, 0, ["<no report>"]
    run = passed = skipped = 0
    failed = []
    for case in ET.parse(report).iter("testcase"):
        run += 1
        outcome = {child.tag for child in case}
        if outcome & {"failure", "error"}:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" in outcome:
            skipped += 1
        else:
            passed += 1
    return run, passed, skipped, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=sys.executable, help="the suite venv's Python")
    parser.add_argument("--report", type=Path, default=Path(".compat-suites/localstack-sqs.xml"))
    parser.add_argument("--allow-failures", action="store_true", help="exit 0 when tests fail")
    args, pytest_args = parser.parse_known_args()  # the rest goes to pytest (make ARGS=...)
    python = os.path.abspath(args.python) if os.sep in args.python else args.python
    report = args.report.resolve()
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    command = [
        python, "-m", "pytest", "--timeout", "120", "-rfE", "--color=no", "--tb=short",
        f"--junitxml={report}", *pytest_args,
    ]  # fmt: skip
    with LocalStack(schedules=False) as stack:
        print(f"=== LocalStack SQS suite: {' '.join(command)}", flush=True)
        subprocess.run(
            command, cwd=SUITE, env=_environment(stack), timeout=RUN_TIMEOUT_S, check=False
        )
    run, passed, skipped, failed = _results(report)
    applicable = run - skipped
    print("\n=== LocalStack SQS suite (aws validated, applicable.txt) against CirrusMQ")
    print(f"{passed} of {applicable} applicable pass ({skipped} skipped by the suite itself)")
    for node in failed:
        print(f"  FAILED {node}")
    return 0 if (not failed and applicable > 0) or args.allow_failures else 1


if __name__ == "__main__":
    sys.exit(main())
