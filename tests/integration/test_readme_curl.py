"""The README's "Try it over HTTP" block runs verbatim, with bash, the real curl, openssl and
jq.

Only the first line's endpoint and key (``E=... AK=... SK=...``) are set to the stack's; the
block passes the receive's receipt handle to the ack itself (jq). A ``curl``
shell function records each answer's status. A ``date`` shell function reads the stack's
clock: the machine's clock and the service's agree for a reader of a fresh ``make dev``,
while this test session's stack may have been moved ahead by an earlier test's
``advance_time`` (the service checks dates against its own clock alone).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from cirrusmq_broker import clock

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDER = "<receipt_handle>"

CURL_WRAPPER = r"""
date() { command date -d "@$(( $(command date +%s) + CLOCK_OFFSET_S ))" "$@"; }
curl() {
  local out status
  out=$(command curl -w $'\n%{http_code}' "$@") || return
  status=${out##*$'\n'}
  out=${out%$'\n'*}
  printf '%s\n' "$out"
  printf '%s %s\n' "$status" "${*//$'\n'/ }" >> "$STATUS_LOG"
}
"""
CREDENTIALS_LINE = re.compile(r"^E=\S+ AK=\S+ SK=\S+$", re.M)


def readme_block() -> str:
    """The bash block under '## Try it over HTTP'."""
    section = README.read_text().split("## Try it over HTTP", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "no bash block under 'Try it over HTTP'"
    return match.group(1)


def run(script: str, status_log: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", CURL_WRAPPER + script],
        env={
            "PATH": "/usr/bin:/bin",
            "STATUS_LOG": str(status_log),
            "CLOCK_OFFSET_S": str(clock.offset_ms() // 1000),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


CALL = re.compile(r"^(?:\w+=\$\()?cmq ")
"""A line that calls the API: ``cmq ...`` or ``R=$(cmq ...)``."""


def run_readme_block(stack, tmp_path: Path) -> str:
    """Run the block against ``stack`` and check every answer; its output."""
    block = readme_block()
    assert len(CREDENTIALS_LINE.findall(block)) == 1, block
    credentials = stack.credentials
    script = CREDENTIALS_LINE.sub(
        f"E={stack.endpoint} AK={credentials.access_key} SK={credentials.secret_key}",
        block,
    )
    assert PLACEHOLDER not in script  # the block fills the handle in itself
    calls = [line for line in script.splitlines() if CALL.match(line)]
    status_log = tmp_path / "statuses"

    done = run(script, status_log)
    assert done.returncode == 0, done.stderr
    assert re.search(r'"receipt_handle": *"[^"]+"', done.stdout), done.stdout

    answers = status_log.read_text().splitlines()
    output = done.stdout
    assert len(answers) == len(calls), (answers, output)
    for answer in answers:
        assert answer.startswith("2"), f"{answer}\n{output}"
    assert '"acked": 1' in output.replace('"acked":1', '"acked": 1'), output
    return output


def test_readme_block_runs_as_is(cirrusmq_stack, tmp_path):
    run_readme_block(cirrusmq_stack, tmp_path)
