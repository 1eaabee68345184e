"""The README's "Try it over HTTP" block runs verbatim, with bash and the real curl.

Only the endpoint ``E`` is changed; ``<receipt_handle>`` becomes the handle the block's own
receive printed (a ``curl`` shell function swaps it in and records each answer's status).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

CURL_WRAPPER = r"""
curl() {
  local args=() arg out status
  for arg in "$@"; do args+=("${arg//<receipt_handle>/$RECEIPT_HANDLE}"); done
  out=$(command curl -w $'\n%{http_code}' "${args[@]}") || return
  status=${out##*$'\n'}
  out=${out%$'\n'*}
  printf '%s\n' "$out"
  printf '%s %s\n' "$status" "${*//$'\n'/ }" >> "$STATUS_LOG"
  local handle
  handle=$(printf '%s' "$out" | sed -n 's/.*"receipt_handle": *"\([^"]*\)".*/\1/p' | head -n 1)
  if [ -n "$handle" ]; then RECEIPT_HANDLE=$handle; fi
}
"""


def readme_block() -> str:
    """The bash block under '## Try it over HTTP'."""
    section = README.read_text().split("## Try it over HTTP", 1)[1]
    match = re.search(r"```bash\n(.*?)```", section, re.S)
    assert match, "no bash block under 'Try it over HTTP'"
    return match.group(1)


@pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")
def test_readme_curl_block_runs_as_is(cirrusmq_stack, tmp_path):
    block = readme_block()
    endpoint_line = re.compile(r"^E=\S+$", re.M)
    assert len(endpoint_line.findall(block)) == 1, block
    script = endpoint_line.sub(f"E={cirrusmq_stack.endpoint}", block)
    status_log = tmp_path / "statuses"
    result = subprocess.run(
        ["bash", "-c", CURL_WRAPPER + script],
        env={"PATH": "/usr/bin:/bin", "STATUS_LOG": str(status_log), "RECEIPT_HANDLE": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answers = status_log.read_text().splitlines()
    assert len(answers) == block.count("curl "), (answers, result.stdout)
    for answer in answers:
        assert answer.startswith("2"), f"{answer}\n{result.stdout}"
    assert '"acked": 1' in result.stdout.replace('"acked":1', '"acked": 1'), result.stdout
