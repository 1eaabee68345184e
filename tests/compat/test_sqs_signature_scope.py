"""SigV4 as the SQS adapter verifies it, in process: a signature must cover the host and the
date and be scoped to the service ``sqs``, as AWS requires."""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import UTC, datetime, timedelta

import pytest
from cirrusmq_api.compat.sqs import sigv4
from cirrusmq_api.compat.sqs.errors import SqsError
from cirrusmq_broker.rules.permissions import Permissions

KEY, SECRET = "AKEXAMPLE", "secret-example"


def _sign(headers: dict[str, str], signed: list[str], body: bytes, service: str = "sqs") -> str:
    """An Authorization header over ``signed`` headers, as any SigV4 signer would make it."""
    amz_date = headers["x-amz-date"]
    date = amz_date[:8]
    canonical = "\n".join(
        [
            "POST",
            "/",
            "",
            "".join(f"{h}:{headers[h]}\n" for h in signed),
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date}/us-east-1/{service}/aws4_request"
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    key = ("AWS4" + SECRET).encode()
    for part in (date, "us-east-1", service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return (
        f"AWS4-HMAC-SHA256 Credential={KEY}/{scope}, SignedHeaders={';'.join(signed)}, "
        f"Signature={signature}"
    )


def _verify(signed: list[str], service: str = "sqs") -> None:
    body = b"Action=ListQueues"
    now = int(time.time() * 1000)
    headers = {
        "host": "h:1",
        "content-type": "application/x-www-form-urlencoded",
        "x-amz-date": datetime.fromtimestamp(now / 1000, UTC).strftime("%Y%m%dT%H%M%SZ"),
    }
    headers["authorization"] = _sign(headers, signed, body, service)
    sigv4.verify(
        method="POST",
        raw_path="/",
        raw_query="",
        headers=headers,
        body=body,
        lookup=lambda key: (SECRET, Permissions(admin=True)) if key == KEY else None,
        now_ms=now,
    )


def test_a_signature_must_cover_host_and_date() -> None:
    _verify(["host", "x-amz-date"])  # the minimum SigV4 asks for
    for signed in (["content-type", "x-amz-date"], ["content-type", "host"]):
        with pytest.raises(SqsError) as caught:
            _verify(signed)
        assert caught.value.status == 403
        assert caught.value.code == "SignatureDoesNotMatch"


def test_a_signature_scoped_to_another_service_is_refused() -> None:
    with pytest.raises(SqsError) as caught:
        _verify(["host", "x-amz-date"], service="s3")
    assert caught.value.status == 403
    assert caught.value.code == "SignatureDoesNotMatch"


def _presigned(
    params: dict[str, str], signed_at: datetime, expires: int = 60, service: str = "sqs"
) -> tuple[str, dict[str, str]]:
    """A presigned GET's raw query and headers, as botocore's ``SigV4QueryAuth`` makes it."""
    from unittest.mock import patch
    from urllib.parse import urlsplit

    from botocore.auth import SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(method="GET", url="http://h:1/000000000000/q", params=params)
    with patch("botocore.auth.get_current_datetime", return_value=signed_at):
        SigV4QueryAuth(Credentials(KEY, SECRET), service, "us-east-1", expires).add_auth(request)
    return urlsplit(request.url).query, {"host": "h:1"}


def _verify_presigned(raw_query: str, headers: dict[str, str], now: datetime) -> None:
    sigv4.verify(
        method="GET",
        raw_path="/000000000000/q",
        raw_query=raw_query,
        headers=headers,
        body=b"",
        lookup=lambda key: (SECRET, Permissions(admin=True)) if key == KEY else None,
        now_ms=int(now.timestamp() * 1000),
    )


def _refused(raw_query: str, headers: dict[str, str], now: datetime) -> tuple[int, str]:
    with pytest.raises(SqsError) as caught:
        _verify_presigned(raw_query, headers, now)
    return caught.value.status, caught.value.code


def test_a_presigned_request_is_good_from_its_date_until_it_expires() -> None:
    signed_at = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    query, headers = _presigned({"Action": "ListQueues"}, signed_at, expires=600)
    _verify_presigned(query, headers, signed_at)
    _verify_presigned(query, headers, signed_at + timedelta(seconds=600))
    late = signed_at + timedelta(seconds=601)
    assert _refused(query, headers, late) == (403, "RequestExpired")
    early = signed_at - timedelta(minutes=16)  # dated ahead of the clock beyond the skew
    assert _refused(query, headers, early) == (403, "RequestExpired")


def test_a_presigned_request_s_parameters_host_and_scope_are_signed() -> None:
    signed_at = datetime.now(UTC)
    query, headers = _presigned({"Action": "SendMessage", "MessageBody": "a"}, signed_at)
    for changed_query, changed_headers in (
        (query.replace("MessageBody=a", "MessageBody=b"), headers),
        (query + "&DelaySeconds=5", headers),
        (query.replace("X-Amz-Expires=60", "X-Amz-Expires=61"), headers),
        (query, {"host": "other:1"}),
    ):
        assert _refused(changed_query, changed_headers, signed_at) == (
            403,
            "SignatureDoesNotMatch",
        )
    s3_query, _ = _presigned({"Action": "ListQueues"}, signed_at, service="s3")
    assert _refused(s3_query, headers, signed_at) == (403, "SignatureDoesNotMatch")


def test_a_presigned_request_may_last_a_week_at_most() -> None:
    signed_at = datetime.now(UTC)
    _verify_presigned(*_presigned({"Action": "ListQueues"}, signed_at, 604800), signed_at)
    for expires in (604801, 0):
        query, headers = _presigned({"Action": "ListQueues"}, signed_at, expires)
        assert _refused(query, headers, signed_at) == (400, "AuthorizationQueryParametersError")


def test_a_request_signed_both_ways_is_refused() -> None:
    signed_at = datetime.now(UTC)
    query, headers = _presigned({"Action": "ListQueues"}, signed_at)
    headers["authorization"] = "AWS4-HMAC-SHA256 Credential=x"
    assert _refused(query, headers, signed_at) == (403, "IncompleteSignature")
