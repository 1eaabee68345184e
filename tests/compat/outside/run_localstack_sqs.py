"""Run LocalStack's vendored SQS tests, unmodified, against a fresh CirrusMQ local stack.

``make test-compat`` calls this with the Python of ``.venv-localstack-suite`` (localstack-core,
localstack-snapshot and pytest, pinned in ``localstack/requirements.txt``). It starts one local
stack, runs pytest in ``localstack/`` with LocalStack's testing settings pointing at the stack
(``localstack/conftest.py`` builds the clients and applies ``localstack/applicable.txt``), and
prints "N of M applicable pass" from the JUnit XML. The suite's tests run each protocol
themselves (``aws_sqs_client`` is parametrized over ``sqs`` and ``sqs_query``).

``localstack/known_failures.txt`` lists the applicable tests CirrusMQ does not pass yet, by
category; the runner prints each category's count, and exits non-zero when a test fails that
the list does not name (a regression) or when nothing ran. A listed test that passes is
reported, to be taken off the list.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from cirrusmq.testing import LocalStack

SUITE = Path(__file__).resolve().parent / "localstack"
KNOWN_FAILURES = SUITE / "known_failures.txt"
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


def known_failures() -> dict[str, str]:
    """``known_failures.txt``: test id (Class::test[param]) -> its category."""
    known: dict[str, str] = {}
    category = ""
    for raw in KNOWN_FAILURES.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            category = line[1:-1]
        else:
            known[line] = category
    return known


def _results(report: Path) -> tuple[int, list[str], int, list[str]]:
    """(run, passed test ids, skipped, failed test ids) of the JUnit XML ``report``."""
    if not report.is_file():  # pytest stopped before writing it
        return 0, [], 0, ["<no report>"]
    run = skipped = 0
    passed, failed = [], []
    for case in ET.parse(report).iter("testcase"):
        run += 1
        outcome = {child.tag for child in case}
        test = f"{(case.get('classname') or '').rsplit('.', 1)[-1]}::{case.get('name')}"
        if outcome & {"failure", "error"}:
            failed.append(test)
        elif "skipped" in outcome:
            skipped += 1
        else:
            passed.append(test)
    return run, passed, skipped, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=sys.executable, help="the suite venv's Python")
    parser.add_argument("--report", type=Path, default=Path(".compat-suites/localstack-sqs.xml"))
    args, pytest_args = parser.parse_known_args()  # the rest goes to pytest (make ARGS=...)
    python = os.path.abspath(args.python) if os.sep in args.python else args.python
    report = args.report.resolve()
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    command = [
        python, "-m", "pytest", "--timeout", "120", "-rfE", "--color=no", "--tb=short",
        f"--junitxml={report}", *pytest_args,
    ]  # fmt: skip
    with LocalStack() as stack:  # its schedules run: AWS releases delayed messages by itself
        print(f"=== LocalStack SQS suite: {' '.join(command)}", flush=True)
        subprocess.run(
            command, cwd=SUITE, env=_environment(stack), timeout=RUN_TIMEOUT_S, check=False
        )
    run, passed, skipped, failed = _results(report)
    applicable = run - skipped
    known = known_failures()
    print("\n=== LocalStack SQS suite (AWS-validated, applicable.txt) against CirrusMQ")
    print(f"{len(passed)} of {applicable} applicable pass ({skipped} skipped by the suite itself)")
    by_category = Counter(known.get(test, "NOT IN known_failures.txt") for test in failed)
    for category, count in by_category.most_common():
        print(f"  {count:4d}  {category}")
    unexpected = [test for test in failed if test not in known]
    for test in unexpected:
        print(f"  UNEXPECTED FAILURE {test}")
    fixed = sorted(test for test in passed if test in known)
    if fixed:
        print(f"  {len(fixed)} tests of known_failures.txt pass now: take them off the list")
        for test in fixed:
            print(f"    {test}")
    return 0 if applicable > 0 and not unexpected else 1


if __name__ == "__main__":
    sys.exit(main())
