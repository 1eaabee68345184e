"""Hostile requests to the RocketMQ HTTP adapter: each gets a 4xx with the protocol's code
(never a 5xx) and stores nothing."""

from __future__ import annotations

import pytest

from .mqhttp_helpers import mq_client
from .test_mqhttp_errors import NS, _assert_nothing_stored, _error_code, _raw

SUPERSCRIPT_TWO = "\u00b2"
"""A character ``str.isdigit`` accepts and ``int`` refuses."""


@pytest.fixture
def client(cirrusmq_stack):
    client = mq_client(cirrusmq_stack)
    try:
        yield client
    finally:
        client.close_connection()


@pytest.mark.parametrize(
    ("method", "query", "body"),
    [
        ("GET", "?consumer=GID_a&numOfMessages=%C2%B2", ""),
        ("GET", "?consumer=GID_a&numOfMessages=1&waitseconds=%C2%B2", ""),
        (
            "POST",
            "",
            f"<Message {NS}><MessageBody>x</MessageBody><Properties>"
            f"__STARTDELIVERTIME:{SUPERSCRIPT_TWO}|</Properties></Message>",
        ),
        (
            "POST",
            "",
            f"<Message {NS}><MessageBody>x</MessageBody><Properties>"
            f"__TransCheckT:{SUPERSCRIPT_TWO}|</Properties></Message>",
        ),
    ],
)
def test_a_number_in_non_ascii_digits_is_invalid_argument(
    cirrusmq_stack, client, make_topic, method: str, query: str, body: str
) -> None:
    topic = make_topic()
    status, _, answer = _raw(cirrusmq_stack, method, f"/topics/{topic}/messages{query}", body)
    assert status == 400
    assert _error_code(answer) == "InvalidArgument"
    _assert_nothing_stored(client, topic)
