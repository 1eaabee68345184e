"""The protocol's errors: wrong signatures and permissions are refused, bad requests get the
protocol's ``<Error>`` with its code (never a 5xx) and store nothing."""

from __future__ import annotations

import http.client
import time
import xml.dom.minidom
from urllib.parse import urlsplit

import pytest
from cirrusmq import Permissions, SubscribeGrant
from mq_http_sdk.mq_exception import MQExceptionBase
from mq_http_sdk.mq_producer import TopicMessage

from .conftest import unique
from .mqhttp_helpers import consume_all, mq_client

INSTANCE = "MQ_INST_local"
XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>'
NS = 'xmlns="http://mq.aliyuncs.com/doc/v1/"'


def _raw(stack, method: str, target: str, body: str = "") -> tuple[int, dict, str]:
    """A request signed as the client signs it (its own ``get_signature``), sent as given."""
    client = mq_client(stack)
    headers = {
        "x-mq-version": "2015-06-06",
        "date": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
    }
    if method != "GET":
        headers["content-type"] = "text/xml;charset=UTF-8"
    headers["Authorization"] = client.get_signature(method, headers, target)
    url = urlsplit(stack.endpoint)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.request(method, target, body.encode("utf-8"), headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        connection.close()
        client.close_connection()


def _error_code(body: str) -> str:
    document = xml.dom.minidom.parseString(body)
    return document.getElementsByTagName("Code")[0].firstChild.data


def _assert_nothing_stored(client, topic: str) -> None:
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    assert consume_all(consumer, 1, wait_seconds=0) == []


def test_a_wrong_secret_is_refused_and_stores_nothing(cirrusmq_stack, client, make_topic) -> None:
    topic = make_topic()
    forger = mq_client(cirrusmq_stack, secret="not-the-secret")
    try:
        with pytest.raises(MQExceptionBase) as refused:
            forger.get_producer(INSTANCE, topic).publish_message(TopicMessage("forged"))
    finally:
        forger.close_connection()
    assert refused.value.type == "SignatureDoesNotMatch"
    _assert_nothing_stored(client, topic)


def test_an_unknown_access_key_is_refused(cirrusmq_stack, make_topic) -> None:
    stranger = mq_client(cirrusmq_stack, access_key="AKNOBODY", secret="x")
    try:
        with pytest.raises(MQExceptionBase) as refused:
            stranger.get_consumer(INSTANCE, make_topic(), "GID_x").consume_message(1, 0)
    finally:
        stranger.close_connection()
    assert refused.value.type == "SignatureDoesNotMatch"


def test_a_key_gets_the_permissions_it_has_on_the_cirrusmq_routes(
    cirrusmq_stack, admin, make_topic
) -> None:
    topic = make_topic("mqp")
    key = admin.create_access_key(
        Permissions(publish=("mqp-*",), subscribe=(SubscribeGrant(("GID_ok",), ("mqp-*",)),))
    )
    narrow = mq_client(cirrusmq_stack, key.access_key, key.secret_key)
    try:
        narrow.get_producer(INSTANCE, topic).publish_message(TopicMessage("allowed"))
        [got] = consume_all(narrow.get_consumer(INSTANCE, topic, "GID_ok"), 1)
        with pytest.raises(MQExceptionBase) as other_group:
            narrow.get_consumer(INSTANCE, topic, "GID_other").consume_message(1, 0)
        assert other_group.value.type == "AccessDenied"
        other_topic = make_topic("other")
        with pytest.raises(MQExceptionBase) as other_topic_publish:
            narrow.get_producer(INSTANCE, other_topic).publish_message(TopicMessage("no"))
        assert other_topic_publish.value.type == "AccessDenied"
    finally:
        narrow.close_connection()
    assert got.message_body == "allowed"


def test_a_bogus_receipt_handle_gets_the_per_handle_error(client, make_topic) -> None:
    consumer = client.get_consumer(INSTANCE, make_topic(), unique("GID"))
    with pytest.raises(MQExceptionBase) as refused:
        consumer.ack_message(["not-a-handle"])
    assert refused.value.type == "ReceiptHandleError"
    assert refused.value.sub_errors[0]["ReceiptHandle"] == "not-a-handle"


def test_a_topic_that_does_not_exist_is_topic_not_exist(client) -> None:
    with pytest.raises(MQExceptionBase) as missing:
        client.get_producer(INSTANCE, unique("nope")).publish_message(TopicMessage("x"))
    assert missing.value.type == "TopicNotExist"


@pytest.mark.parametrize(
    ("method", "query", "body", "code"),
    [
        ("POST", "", "<Message", "MalformedXML"),
        (
            "POST",
            "",
            f"{XML_DECLARATION}<Message {NS}><MessageBody>a\x01b</MessageBody></Message>",
            "MalformedXML",
        ),
        ("POST", "", f"<Message {NS}><MessageBody></MessageBody></Message>", "InvalidArgument"),
        (
            "POST",
            "",
            f"<Message {NS}><MessageBody>x</MessageBody><Properties>"
            "__STARTDELIVERTIME:soon|</Properties></Message>",
            "InvalidArgument",
        ),
        (
            "POST",
            "",
            f"<Message {NS}><MessageBody>x</MessageBody><MessageTag>a b</MessageTag></Message>",
            "InvalidArgument",
        ),
        (
            "POST",
            "?ns=I&extra=1",
            f"<Message {NS}><MessageBody>x</MessageBody></Message>",
            "InvalidQueryString",
        ),
        (
            "POST",
            "",
            '<!DOCTYPE x [<!ENTITY e "e">]><Message><MessageBody>&e;</MessageBody></Message>',
            "MalformedXML",
        ),
        ("GET", "?consumer=GID_a&numOfMessages=0", "", "InvalidArgument"),
        ("GET", "?consumer=GID_a&numOfMessages=17", "", "InvalidArgument"),
        ("GET", "?consumer=GID_a&numOfMessages=1&waitseconds=31", "", "InvalidArgument"),
        ("GET", "?consumer=GID_a&numOfMessages=1&tag=%7C%7C", "", "InvalidArgument"),
        ("GET", "?numOfMessages=1", "", "InvalidQueryString"),
        ("GET", "?consumer=GID_a&numOfMessages=1&trans=commit", "", "InvalidArgument"),
        (
            "DELETE",
            "?consumer=GID_a",
            f"<ReceiptHandles {NS}></ReceiptHandles>",
            "MissingReceiptHandle",
        ),
        ("DELETE", "?consumer=GID_a", "not xml", "MalformedXML"),
        (
            "DELETE",
            "?consumer=GID_a&trans=order",
            f"<ReceiptHandles {NS}><ReceiptHandle>h</ReceiptHandle></ReceiptHandles>",
            "InvalidArgument",
        ),
    ],
)
def test_a_bad_request_gets_the_protocols_error_and_stores_nothing(
    cirrusmq_stack, client, make_topic, method: str, query: str, body: str, code: str
) -> None:
    topic = make_topic()
    status, headers, answer = _raw(cirrusmq_stack, method, f"/topics/{topic}/messages{query}", body)
    assert 400 <= status < 500
    assert _error_code(answer) == code
    assert headers["x-mq-request-id"]
    _assert_nothing_stored(client, topic)


def test_a_partly_bad_ack_acks_the_good_handles_and_reports_the_bad_ones(
    client, make_topic
) -> None:
    topic = make_topic()
    client.get_producer(INSTANCE, topic).publish_message(TopicMessage("one"))
    consumer = client.get_consumer(INSTANCE, topic, unique("GID"))
    [got] = consume_all(consumer, 1)
    with pytest.raises(MQExceptionBase) as partly:
        consumer.ack_message([got.receipt_handle, "bogus"])
    assert [e["ReceiptHandle"] for e in partly.value.sub_errors] == ["bogus"]
    consumer.ack_message([got.receipt_handle])  # acking again is fine
