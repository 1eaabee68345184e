"""Queue names, URLs and ARNs ↔ CirrusMQ topics and consumer groups.

A queue ``q`` is the topic ``q`` consumed by the group ``sqs-q``; a FIFO queue ``q.fifo`` is
the FIFO topic ``q_fifo`` (topic names have no ``.``) and the group ``sqs-q_fifo``. So that a
standard queue never takes a FIFO queue's topic, a standard queue whose name ends in ``_fifo``
and any number of ``_`` gets one more ``_`` (``q_fifo`` is the topic ``q_fifo_``), except a
standard queue ``q_fifo`` stored by an earlier release as the topic ``q_fifo`` (``legacy``:
:func:`cirrusmq_api.compat.sqs.context.Call.resolve` finds it). Queue URLs
are ``{endpoint}/{ACCOUNT_ID}/{queue}``, ARNs ``arn:aws:sqs:{region}:{ACCOUNT_ID}:{queue}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import SqsError, invalid_parameter, queue_does_not_exist

ACCOUNT_ID = "000000000000"
"""The fixed pseudo account id of every queue URL and ARN."""
GROUP_PREFIX = "sqs-"
FIFO_SUFFIX = ".fifo"
TOPIC_FIFO_SUFFIX = "_fifo"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_ESCAPED = re.compile(r".*_fifo_*")
"""Standard queue names that would read as a FIFO queue's topic, or as an escaped name."""


@dataclass(frozen=True)
class QueueName:
    name: str
    legacy: bool = False
    """A standard queue ``..._fifo`` whose topic is its own name (as an earlier release
    stored it)."""

    @property
    def fifo(self) -> bool:
        return self.name.endswith(FIFO_SUFFIX)

    @property
    def may_be_legacy(self) -> bool:
        """A standard queue an earlier release may have stored under its own name (names
        ending in ``_fifo_``... were their own topics too, but those topics are now the
        escaped names of others: only ``..._fifo`` can be told apart)."""
        return not self.fifo and self.name.endswith(TOPIC_FIFO_SUFFIX)

    @property
    def topic(self) -> str:
        if self.legacy:
            return self.name
        if self.fifo:
            return self.name[: -len(FIFO_SUFFIX)] + TOPIC_FIFO_SUFFIX
        if _ESCAPED.fullmatch(self.name):
            return self.name + "_"
        return self.name

    @property
    def group(self) -> str:
        return GROUP_PREFIX + self.topic

    def url(self, endpoint: str) -> str:
        return f"{endpoint.rstrip('/')}/{ACCOUNT_ID}/{self.name}"

    def arn(self, region: str) -> str:
        return f"arn:aws:sqs:{region}:{ACCOUNT_ID}:{self.name}"


def queue_name(name: object) -> QueueName:
    """A valid queue name (InvalidParameterValue otherwise)."""
    if not isinstance(name, str):
        raise invalid_parameter("QueueName must be a string.")
    base = name[: -len(FIFO_SUFFIX)] if name.endswith(FIFO_SUFFIX) else name
    if len(name) > 80 or not _NAME.fullmatch(base):
        raise invalid_parameter(
            "Can only include alphanumeric characters, hyphens, or underscores. "
            "1 to 80 in length (a FIFO queue's name ends in .fifo)."
        )
    return QueueName(name)


def from_url(url: object) -> QueueName:
    """The queue a queue URL names (its last path segment)."""
    if not isinstance(url, str) or not url:
        raise SqsError("MissingParameter", "The request must contain the parameter QueueUrl.")
    path = urlsplit(url).path if "://" in url else url
    try:
        return queue_name(path.rstrip("/").rsplit("/", 1)[-1])
    except SqsError:
        raise queue_does_not_exist() from None


def from_arn(arn: object) -> QueueName:
    """The queue an SQS ARN names."""
    if not isinstance(arn, str) or not arn.startswith("arn:") or arn.count(":") != 5:
        raise invalid_parameter(f"Value {str(arn)[:200]} is not a valid queue ARN.")
    return queue_name(arn.rsplit(":", 1)[1])


def from_topic(topic: str, *, fifo: bool) -> QueueName | None:
    """The queue a topic (FIFO or not) is served as (None: no queue has that topic); a
    standard topic ``..._fifo`` is an earlier release's queue if it is one (``legacy``: the
    caller resolves it)."""
    if not fifo and topic.endswith(TOPIC_FIFO_SUFFIX):
        try:
            return QueueName(queue_name(topic).name, legacy=True)
        except SqsError:
            return None
    if fifo:
        if not topic.endswith(TOPIC_FIFO_SUFFIX):
            return None
        name = topic[: -len(TOPIC_FIFO_SUFFIX)] + FIFO_SUFFIX
    else:
        name = topic[:-1] if _ESCAPED.fullmatch(topic) and topic.endswith("_") else topic
    try:
        queue = queue_name(name)
    except SqsError:
        return None
    return queue if queue.topic == topic else None
