"""The query protocol as HTTP GET, signed by a presigned URL (SigV4 in the query string): it
grants what its key may do and nothing more; a changed parameter, an expired URL or an
unsigned GET is refused."""

from __future__ import annotations

import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from unittest.mock import patch
from urllib.parse import urlencode, urlsplit

import httpx
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from .sqs_helpers import REGION, new_sqs_key, query_error, queue_name, sqs  # noqa: F401


def _presign(url: str, params: dict[str, str], keys: tuple[str, str], expires: int = 60) -> str:
    request = AWSRequest(method="GET", url=url, params=params)
    SigV4QueryAuth(Credentials(*keys), "sqs", REGION, expires=expires).add_auth(request)
    return request.url


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers or {}), timeout=60
        ) as answer:
            return answer.status, answer.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


def _admin(stack) -> tuple[str, str]:
    return stack.credentials.access_key, stack.credentials.secret_key


def test_a_presigned_get_runs_the_action_of_its_key(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    keys = _admin(cirrusmq_stack)
    status, text = _get(_presign(url, {"Action": "SendMessage", "MessageBody": "hi"}, keys))
    assert status == 200, text
    status, text = _get(_presign(url, {"Action": "ReceiveMessage"}, keys))
    assert status == 200 and "<Body>hi</Body>" in text, text
    root = cirrusmq_stack.endpoint.rstrip("/") + "/"
    status, text = _get(_presign(root, {"Action": "ListQueues"}, keys))
    assert status == 200 and f"<QueueUrl>{url}</QueueUrl>" in text, text


def test_a_presigned_get_of_a_key_without_the_queue_s_grant_is_refused(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    outsider = new_sqs_key(cirrusmq_stack, {"publish": [f"{queue_name}-other"]})
    status, text = _get(_presign(url, {"Action": "SendMessage", "MessageBody": "x"}, outsider))
    assert status in (400, 403), text
    assert "Messages" not in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)


def test_a_changed_parameter_breaks_the_signature(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    signed = _presign(url, {"Action": "SendMessage", "MessageBody": "a"}, _admin(cirrusmq_stack))
    status, text = _get(signed.replace("MessageBody=a", "MessageBody=b"))
    assert (status, query_error(text)[0]) == (403, "SignatureDoesNotMatch"), text
    assert "Messages" not in sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)


def test_an_expired_or_overlong_presigned_url_is_refused(cirrusmq_stack, sqs, queue_name) -> None:  # noqa: F811
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    keys = _admin(cirrusmq_stack)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)
    with patch("botocore.auth.get_current_datetime", return_value=an_hour_ago):
        expired = _presign(url, {"Action": "GetQueueAttributes"}, keys, expires=60)
    status, text = _get(expired)
    assert (status, query_error(text)[0]) == (403, "RequestExpired"), text
    status, text = _get(_presign(url, {"Action": "GetQueueAttributes"}, keys, 604801))
    assert status == 400 and query_error(text)[0] == "AuthorizationQueryParametersError", text


def test_an_unsigned_get_is_refused_and_a_bare_root_goes_to_the_console(
    cirrusmq_stack,
    sqs,  # noqa: F811
    queue_name,  # noqa: F811
) -> None:
    url = sqs.create_queue(QueueName=queue_name)["QueueUrl"]
    status, text = _get(url + "?" + urlencode({"Action": "DeleteQueue"}))
    assert (status, query_error(text)[0]) == (403, "MissingAuthenticationToken"), text
    assert sqs.get_queue_url(QueueName=queue_name)["QueueUrl"] == url
    root = httpx.get(cirrusmq_stack.endpoint + "/")
    assert (root.status_code, root.headers["location"]) == (302, "/console/")
    assert urlsplit(url).path.count("/") == 2
