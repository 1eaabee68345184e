"""The adapter's signature check against the protocol document's test vectors (computed with
the client's own ``get_signature``), and its reading of the raw request target."""

from __future__ import annotations

import pytest
from cirrusmq_api.compat.mqhttp import signature
from cirrusmq_api.compat.mqhttp.errors import MqHttpError

DATE = "Thu, 07 Mar 2024 18:49:58 GMT"
SECRET = "SECRET_EXAMPLE"


@pytest.mark.parametrize(
    ("method", "target", "expected"),
    [
        (
            "GET",
            "/topics/T/messages?consumer=GID_a&numOfMessages=16&ns=MQ_INST_1&waitseconds=3"
            "&tag=TagA%7C%7CTagB",
            "D23vRtvxtlHusK+SYJgJ+wNWt9s=",
        ),
        ("POST", "/topics/T/messages?ns=MQ_INST_1", "AB0FpACKECCWDFg4ux8O1dV7//U="),
        (
            "DELETE",
            "/topics/T/messages?consumer=GID_a&ns=MQ_INST_1&trans=commit",
            "1wYcbFhJKlj/IhQ7yNhtk1yyZaE=",
        ),
    ],
)
def test_the_documented_vectors_verify(method: str, target: str, expected: str) -> None:
    headers = {"date": DATE, "x-mq-version": "2015-06-06", "host": "h"}
    if method != "GET":
        headers["content-type"] = "text/xml;charset=UTF-8"
    path, _, query = target.partition("?")
    text = signature.string_to_sign(method, headers, signature.request_target(path, query))
    assert signature.signature(SECRET, text) == expected
    assert signature.matches(SECRET, text, expected)


def test_a_reencoded_query_does_not_verify() -> None:
    headers = {"date": DATE, "x-mq-version": "2015-06-06"}
    sent = "/topics/T/messages?consumer=GID_a&numOfMessages=16&ns=MQ_INST_1&waitseconds=3"
    given = signature.signature(
        SECRET, signature.string_to_sign("GET", headers, sent + "&tag=TagA%7C%7CTagB")
    )
    rebuilt = signature.string_to_sign("GET", headers, sent + "&tag=TagA||TagB")
    assert not signature.matches(SECRET, rebuilt, given)


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (None, "MissingAuthorizationHeader"),
        ("MQ nokey", "InvalidAuthorizationHeader"),
        ("AWS a:b", "InvalidAuthorizationHeader"),
    ],
)
def test_a_malformed_authorization_is_refused(value: str | None, code: str) -> None:
    headers = {} if value is None else {"authorization": value}
    with pytest.raises(MqHttpError) as refused:
        signature.read_authorization(headers)
    assert refused.value.code == code


def test_a_date_far_from_both_clocks_is_refused() -> None:
    dated = 1709837398000  # DATE in ms
    signature.check_date({"date": DATE}, [dated + 3_600_000, dated + 60_000])
    with pytest.raises(MqHttpError) as refused:
        signature.check_date({"date": DATE}, [dated + 3_600_000])
    assert refused.value.code == "InvalidDateHeader"
    with pytest.raises(MqHttpError):
        signature.check_date({"date": "yesterday"}, [dated])
