"""The Aliyun ``mq-http-sdk`` client (PyPI, unmodified) pointed at a local stack."""

from __future__ import annotations

from mq_http_sdk.mq_client import MQClient
from mq_http_sdk.mq_exception import MQExceptionBase


def mq_client(stack, access_key: str | None = None, secret: str | None = None) -> MQClient:
    """A client on the stack's endpoint signing with a CirrusMQ access key (default: the
    stack's admin key) as AccessId / AccessKey."""
    credentials = stack.credentials
    return MQClient(
        stack.endpoint,
        access_key or credentials.access_key,
        secret or credentials.secret_key,
    )


def consume_all(consumer, expected: int, *, wait_seconds: int = 1, orderly: bool = False) -> list:
    """Consume until ``expected`` messages came (or a poll came back empty)."""
    found: list = []
    while len(found) < expected:
        try:
            batch = (
                consumer.consume_message_orderly(16, wait_seconds)
                if orderly
                else consumer.consume_message(16, wait_seconds)
            )
        except MQExceptionBase as exc:
            if getattr(exc, "type", "") == "MessageNotExist":
                break
            raise
        found.extend(batch)
    return found


def check_once(stack) -> dict:
    """One pass of the transaction back-checker (the scheduled run would loop through its
    minute while a check falls due within it)."""
    return stack.invoke("TxnCheckerFunction", {"task": "check", "loop_seconds": 0})
