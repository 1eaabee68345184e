"""SigV4 as the SQS adapter verifies it, in process: a signature must cover the host and the
date and be scoped to the service ``sqs``, as AWS requires."""

from __future__ import annotations

import hashlib
import hmac
import time
from datetime import UTC, datetime

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
