"""docs/compat.md's "Move your application" snippet runs as written against a local stack
(its endpoint and keys swapped for the stack's)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "compat.md"


def test_the_move_your_application_snippet_runs(cirrusmq_stack) -> None:
    section = DOC.read_text().split("## SQS", 1)[1]
    snippet = re.search(r"```python\n(.*?)```", section, re.S)
    assert snippet is not None
    queue = f"orders-{uuid.uuid4().hex[:8]}"  # the session's stack is shared: a name of its own
    code = (
        snippet.group(1)
        .replace('QueueName="orders"', f"QueueName={queue!r}")
        .replace("http://127.0.0.1:8080", cirrusmq_stack.endpoint)
        .replace('"local-admin"', repr(cirrusmq_stack.credentials.access_key))
        .replace(
            'aws_secret_access_key="..."',
            f"aws_secret_access_key={cirrusmq_stack.credentials.secret_key!r}",
        )
    )
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the documented snippet
    assert namespace["url"].endswith(f"/000000000000/{queue}")
    sqs = namespace["sqs"]
    attributes = sqs.get_queue_attributes(QueueUrl=namespace["url"], AttributeNames=["All"])
    assert attributes["Attributes"]["ApproximateNumberOfMessages"] == "0"
