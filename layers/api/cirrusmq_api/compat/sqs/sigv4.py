"""AWS Signature Version 4, verified with CirrusMQ access keys.

The access key id is a CirrusMQ access key, the secret its secret. The signature is checked
with the region of the request's own credential scope (botocore signs SQS requests with the
client's region, which may be any); the scope's service must be ``sqs``, the signed headers
must include ``host`` and ``x-amz-date``, and the date must be within
:data:`MAX_SKEW_SECONDS` of the broker clock. SigV4 carries no nonce: a captured
request can be replayed within that window (as with SQS itself).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from urllib.parse import quote

from cirrusmq_broker.rules.permissions import Permissions
from cirrusmq_broker.services.auth import Principal

from .errors import SqsError

ALGORITHM = "AWS4-HMAC-SHA256"
MAX_SKEW_SECONDS = 900
"""SQS's own window (15 minutes)."""
SERVICE = "sqs"
REQUIRED_SIGNED_HEADERS = ("host", "x-amz-date")
"""Headers every signature must cover, as AWS requires: unsigned, the request could be
replayed to another host, or with another date for the whole day of its credential scope."""

_AUTHORIZATION = re.compile(
    rf"{ALGORITHM}\s+Credential=(?P<key>[^/\s,]+)/(?P<date>\d{{8}})/(?P<region>[^/\s,]+)/"
    r"(?P<service>[^/\s,]+)/aws4_request\s*,\s*SignedHeaders=(?P<headers>[a-z0-9;_.-]+)\s*,"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})"
)

KeyLookup = Callable[[str], "tuple[str, Permissions] | None"]


def verify(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    body: bytes,
    lookup: KeyLookup,
    now_ms: int | Sequence[int],
) -> Principal:
    """The principal that signed the request; raises the SQS authentication errors.

    ``now_ms``: the clock(s) the date may be within :data:`MAX_SKEW_SECONDS` of: the service's
    and the host's (the same in a deployment; a local stack whose time was advanced keeps
    accepting clients, which sign with the wall clock)."""
    authorization = (headers.get("authorization") or "").strip()
    if not authorization:
        raise SqsError(
            "MissingAuthenticationToken",
            "Request is missing Authentication Token",
            status=403,
        )
    match = _AUTHORIZATION.fullmatch(authorization)
    if match is None:
        raise SqsError(
            "IncompleteSignature",
            "The request signature does not conform to AWS standards.",
            status=403,
        )
    signed_headers = match["headers"].split(";")
    if match["service"] != SERVICE or not set(REQUIRED_SIGNED_HEADERS) <= set(signed_headers):
        raise SqsError(
            "SignatureDoesNotMatch",
            f"The credential scope must name the service {SERVICE} and the signed headers "
            f"must include {' and '.join(REQUIRED_SIGNED_HEADERS)}.",
            status=403,
        )
    amz_date = (headers.get("x-amz-date") or "").strip()
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SqsError(
            "IncompleteSignature", "X-Amz-Date is missing or malformed.", status=403
        ) from None
    if not amz_date.startswith(match["date"]):
        raise SqsError(
            "SignatureDoesNotMatch",
            "The credential scope date is not the request date.",
            status=403,
        )
    clocks = (now_ms,) if isinstance(now_ms, int) else tuple(now_ms)
    signed_ms = signed_at.timestamp() * 1000
    if all(abs(now - signed_ms) > MAX_SKEW_SECONDS * 1000 for now in clocks):
        now_text = datetime.fromtimestamp(clocks[0] / 1000, UTC).strftime("%Y%m%dT%H%M%SZ")
        raise SqsError(
            "SignatureDoesNotMatch",
            f"Signature expired: {amz_date} is now earlier or later than {now_text} "
            f"(+/- {MAX_SKEW_SECONDS // 60} min).",
            status=403,
        )
    key = lookup(match["key"])
    if key is None:
        raise SqsError(
            "InvalidClientTokenId",
            "The security token included in the request is invalid.",
            status=403,
        )
    secret, permissions = key
    canonical = "\n".join(
        [
            method.upper(),
            quote(raw_path or "/", safe="/~"),
            _canonical_query(raw_query),
            "".join(f"{h}:{_header_value(headers.get(h, ''))}\n" for h in signed_headers),
            match["headers"],
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{match['date']}/{match['region']}/{match['service']}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    signing = _signing_key(secret, match["date"], match["region"], match["service"])
    expected = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, match["signature"]):
        raise SqsError(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.",
            status=403,
        )
    return Principal(match["key"], permissions)


def _canonical_query(raw_query: str) -> str:
    if not raw_query:
        return ""
    pairs = [pair.partition("=") for pair in raw_query.split("&") if pair]
    return "&".join(f"{k}={v}" for k, _, v in sorted(pairs, key=lambda p: (p[0], p[2])))


def _header_value(value: str) -> str:
    return " ".join(value.split())


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key
