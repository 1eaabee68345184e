"""Hostile requests to the RocketMQ HTTP adapter: each gets a 4xx with the protocol's code
(never a 5xx) and stores nothing."""

from __future__ import annotations

import base64
import hashlib
import http.client
import time
from urllib.parse import urlsplit

import pytest

from .mqhttp_helpers import mq_client
from .test_mqhttp_errors import NS, _assert_nothing_stored, _error_code, _raw

SUPERSCRIPT_TWO = "\u00b2"
"""A character ``str.isdigit`` accepts and ``int`` refuses."""


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


def _raw_bytes(stack, target: str, body: bytes) -> tuple[int, str]:
    """A signed POST whose body is sent as these bytes."""
    signer = mq_client(stack)
    headers = {
        "x-mq-version": "2015-06-06",
        "date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
        "content-type": "text/xml;charset=UTF-16",
    }
    headers["Authorization"] = signer.get_signature("POST", headers, target)
    url = urlsplit(stack.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("POST", target, body, headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()
        signer.close_connection()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_document_type_declaration_is_refused_in_any_encoding(
    cirrusmq_stack, client, make_topic, encoding: str
) -> None:
    topic = make_topic()
    document = (
        f'<?xml version="1.0" encoding="{encoding.upper()}"?>'
        '<!DOCTYPE Message [<!ENTITY e "expanded">]>'
        f"<Message {NS}><MessageBody>&e;</MessageBody></Message>"
    )
    status, answer = _raw_bytes(
        cirrusmq_stack, f"/topics/{topic}/messages", document.encode(encoding)
    )
    assert status == 400
    assert _error_code(answer) == "MalformedXML"
    _assert_nothing_stored(client, topic)


@pytest.mark.parametrize("declared", ["EUC-JP", "UTF-16-LE", "no-such-encoding"])
def test_an_unsupported_declared_encoding_is_malformed_xml(
    cirrusmq_stack, client, make_topic, declared: str
) -> None:
    topic = make_topic()
    document = (
        f'<?xml version="1.0" encoding="{declared}"?>'
        f"<Message {NS}><MessageBody>x</MessageBody></Message>"
    )
    status, answer = _raw_bytes(cirrusmq_stack, f"/topics/{topic}/messages", document.encode())
    assert status == 400
    assert _error_code(answer) == "MalformedXML"
    _assert_nothing_stored(client, topic)


def _signed_post(stack, target: str, body: bytes, content_md5: str) -> tuple[int, str]:
    """A POST whose signature covers ``content_md5`` (the client signs the header if sent)."""
    signer = mq_client(stack)
    headers = {
        "x-mq-version": "2015-06-06",
        "date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
        "content-type": "text/xml;charset=UTF-8",
        "content-md5": content_md5,
    }
    headers["Authorization"] = signer.get_signature("POST", headers, target)
    url = urlsplit(stack.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("POST", target, body, headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()
        signer.close_connection()


def _message(text: str) -> bytes:
    return f"<Message {NS}><MessageBody>{text}</MessageBody></Message>".encode()


def test_a_body_other_than_the_signed_content_md5_is_refused(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic()
    signed_for = base64.b64encode(hashlib.md5(_message("pay 1")).digest()).decode()
    status, answer = _signed_post(
        cirrusmq_stack, f"/topics/{topic}/messages", _message("pay 1000"), signed_for
    )
    assert status == 400
    assert _error_code(answer) == "InvalidDigest"
    _assert_nothing_stored(client, topic)


def test_a_body_matching_its_signed_content_md5_is_published(
    cirrusmq_stack, client, make_topic
) -> None:
    topic = make_topic()
    body = _message("pay 1")
    status, _ = _signed_post(
        cirrusmq_stack,
        f"/topics/{topic}/messages",
        body,
        base64.b64encode(hashlib.md5(body).digest()).decode(),
    )
    assert status == 201


@pytest.mark.parametrize(
    "inner",
    [
        "<MessageBody>kept<b>lost</b>tail</MessageBody>",
        "<MessageBody>x</MessageBody><MessageTag>a<b/>c</MessageTag>",
        "<MessageBody>x</MessageBody><Properties>k:v|<b/>k2:v2|</Properties>",
    ],
)
def test_markup_inside_a_field_is_malformed_xml_not_truncated(
    cirrusmq_stack, client, make_topic, inner: str
) -> None:
    topic = make_topic()
    status, answer = _raw_bytes(
        cirrusmq_stack, f"/topics/{topic}/messages", f"<Message {NS}>{inner}</Message>".encode()
    )
    assert status == 400
    assert _error_code(answer) == "MalformedXML"
    _assert_nothing_stored(client, topic)


def test_a_non_ascii_signature_is_signature_does_not_match(
    cirrusmq_stack, credentials, make_topic
) -> None:
    topic = make_topic()
    target = f"/topics/{topic}/messages?consumer=GID_a&numOfMessages=1"
    headers = {
        "x-mq-version": "2015-06-06",
        "date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
        "Authorization": f"MQ {credentials.access_key}:sign\u00e9".encode().decode("latin-1"),
    }
    url = urlsplit(cirrusmq_stack.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        status, answer = response.status, response.read().decode()
    finally:
        connection.close()
    assert status == 403
    assert _error_code(answer) == "SignatureDoesNotMatch"


@pytest.mark.parametrize(
    "date", ["Mon, 01 Jan 99999999999999999999 00:00:00 GMT", "Mon, 01 Jan 99999 00:00:00 GMT"]
)
def test_a_date_with_an_absurd_year_is_invalid_date_header(
    cirrusmq_stack, credentials, make_topic, date: str
) -> None:
    topic = make_topic()
    signer = mq_client(cirrusmq_stack)
    target = f"/topics/{topic}/messages?consumer=GID_a&numOfMessages=1"
    headers = {"x-mq-version": "2015-06-06", "date": date}
    headers["Authorization"] = signer.get_signature("GET", headers, target)
    signer.close_connection()
    url = urlsplit(cirrusmq_stack.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request("GET", target, headers=headers)
        response = connection.getresponse()
        status, answer = response.status, response.read().decode()
    finally:
        connection.close()
    assert status == 400
    assert _error_code(answer) == "InvalidDateHeader"
