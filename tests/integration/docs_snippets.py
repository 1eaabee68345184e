"""The Python snippets of the README and the guides, in the order a reader meets them.

Every ```` ```python ```` fence is a snippet. An HTML comment on the line before the fence
(invisible on GitHub) says how it runs:

- none: in this process, in one namespace shared by all the snippets run so far (a reader
  pasting them into one session);
- ``<!-- snippet: own-process -->``: in a fresh interpreter (it starts its own local stack);
- ``<!-- snippet: spark -->``: in the Spark tests (tests/spark/test_docs_spark.py);
- ``<!-- snippet: skip, <why> -->``: not run (a signature, a fragment, an S3 data lake).

The tests assert how many snippets of each kind every page has, so a snippet cannot drop out
(or a marker spread) unnoticed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READER_ORDER = (
    "README.md",
    "docs/sdk.md",
    "docs/transactions.md",
    "docs/spark.md",
    "docs/deploy.md",
    "docs/compat.md",
)
"""The README links the SDK guide, which links the transactions guide; then Spark, and
deploying to AWS last."""

_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_MARKER = re.compile(r"^<!-- snippet: (own-process|spark|skip, .+?) -->$")


@dataclass(frozen=True)
class Snippet:
    doc: str
    line: int
    """Line of the opening fence (1-based)."""
    code: str
    how: str
    """``run``, ``own-process``, ``spark`` or ``skip``."""

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"

    def compiled(self, code: str | None = None):
        """The code compiled under its place in the docs (tracebacks point there)."""
        return compile(self.code if code is None else code, self.where, "exec")


def snippets(doc: str) -> list[Snippet]:
    """The Python snippets of ``doc`` (a path relative to the repository), in order."""
    lines = (ROOT / doc).read_text().splitlines()
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            if lines[i].startswith("<!-- snippet"):
                assert _MARKER.match(lines[i]), f"{doc}:{i + 1}: unknown marker {lines[i]!r}"
                nxt = lines[i + 1] if i + 1 < len(lines) else ""
                assert nxt.startswith("```python"), f"{doc}:{i + 1}: a marker before no snippet"
            i += 1
            continue
        indent, language = fence.groups()
        end = i + 1
        while not re.match(rf"^{indent}```\s*$", lines[end]):
            end += 1
        if language == "python":
            marker = _MARKER.match(lines[i - 1]) if i else None
            how = "run" if marker is None else marker[1].split(",")[0]
            code = "\n".join(line[len(indent) :] for line in lines[i + 1 : end]) + "\n"
            found.append(Snippet(doc, i + 1, code, how))
        i = end + 1
    return found


def in_reader_order() -> list[Snippet]:
    return [s for doc in READER_ORDER for s in snippets(doc)]
