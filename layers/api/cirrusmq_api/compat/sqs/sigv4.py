"""AWS Signature Version 4, verified with CirrusMQ access keys.

The access key id is a CirrusMQ access key, the secret its secret. The signature is checked
with the region of the request's own credential scope (botocore signs SQS requests with the
client's region, which may be any); the scope's service must be ``sqs``, the signed headers
must include ``host`` and ``x-amz-date``, and the date must be within
:data:`MAX_SKEW_SECONDS` of the broker clock. A presigned request (the signature in the query
string, ``X-Amz-Signature``) is verified the same way, its date being good until its
``X-Amz-Expires``. SigV4 carries no nonce: a captured
request can be replayed within that window (as with SQS itself).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote

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

QUERY_SIGNATURE = "X-Amz-Signature"
QUERY_CREDENTIAL = "X-Amz-Credential"
AUTH_PARAMETERS = frozenset(
    {
        "X-Amz-Algorithm", QUERY_CREDENTIAL, "X-Amz-Date", "X-Amz-Expires",
        "X-Amz-SignedHeaders", QUERY_SIGNATURE, "X-Amz-Security-Token",
    }
)  # fmt: skip
"""A presigned request's signature parameters: never the action's parameters."""
MAX_PRESIGNED_SECONDS = 604800
"""The longest a presigned request may be good for (7 days), as AWS allows."""

_CREDENTIAL = re.compile(
    r"(?P<key>[^/\s,]+)/(?P<date>\d{8})/(?P<region>[^/\s,]+)/(?P<service>[^/\s,]+)/aws4_request"
)
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
    query = dict(parse_qsl(raw_query, keep_blank_values=True))
    if QUERY_SIGNATURE in query:
        if authorization:
            raise SqsError(
                "IncompleteSignature",
                "The request carries both an Authorization header and a query-string signature.",
                status=403,
            )
        return _verify_presigned(
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            query=query,
            headers=headers,
            body=body,
            lookup=lookup,
            now_ms=now_ms,
        )
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
    signed_at = _signed_at(amz_date, match["date"])
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
    return _check_signature(
        method=method,
        raw_path=raw_path,
        canonical_query=_canonical_query(raw_query),
        headers=headers,
        scope=Scope(match["key"], match["date"], match["region"], match["service"]),
        signed_headers=match["headers"],
        amz_date=amz_date,
        payload_hash=hashlib.sha256(body).hexdigest(),
        signature=match["signature"],
        lookup=lookup,
    )


@dataclass(frozen=True)
class Scope:
    key: str
    date: str
    region: str
    service: str


def region(headers: Mapping[str, str], raw_query: str) -> str | None:
    """The region of the request's credential scope (header or query-string signature)."""
    credential = dict(parse_qsl(raw_query)).get(QUERY_CREDENTIAL) or headers.get(
        "authorization", ""
    )
    found = re.search(r"[^/=\s]+/\d{8}/([^/]+)/", credential)
    return found.group(1) if found else None


def _verify_presigned(
    *,
    method: str,
    raw_path: str,
    raw_query: str,
    query: Mapping[str, str],
    headers: Mapping[str, str],
    body: bytes,
    lookup: KeyLookup,
    now_ms: int | Sequence[int],
) -> Principal:
    """A presigned request: the signature and its parameters are in the query string, the
    payload's hash is signed as with a header signature (botocore's presigner signs it; a
    body is never left unsigned), and the request is good from its date
    (less :data:`MAX_SKEW_SECONDS`) until ``X-Amz-Expires`` seconds after it."""
    credential = _CREDENTIAL.fullmatch(query.get(QUERY_CREDENTIAL, ""))
    signature = query.get(QUERY_SIGNATURE, "")
    signed_headers = query.get("X-Amz-SignedHeaders", "")
    if (
        query.get("X-Amz-Algorithm") != ALGORITHM
        or credential is None
        or not re.fullmatch(r"[0-9a-f]{64}", signature)
        or not re.fullmatch(r"[a-z0-9;_.-]+", signed_headers)
    ):
        raise SqsError(
            "IncompleteSignature",
            "The query-string signature does not conform to AWS standards.",
            status=403,
        )
    if credential["service"] != SERVICE or "host" not in signed_headers.split(";"):
        raise SqsError(
            "SignatureDoesNotMatch",
            f"The credential scope must name the service {SERVICE} and the signed headers "
            "must include host.",
            status=403,
        )
    expires = query.get("X-Amz-Expires", "")
    if not expires.isdigit() or not 1 <= int(expires) <= MAX_PRESIGNED_SECONDS:
        raise SqsError(
            "AuthorizationQueryParametersError",
            f"X-Amz-Expires must be a number of seconds from 1 to {MAX_PRESIGNED_SECONDS}.",
        )
    amz_date = query.get("X-Amz-Date", "")
    signed_at = _signed_at(amz_date, credential["date"])
    clocks = (now_ms,) if isinstance(now_ms, int) else tuple(now_ms)
    signed_ms = signed_at.timestamp() * 1000
    if not any(
        signed_ms - MAX_SKEW_SECONDS * 1000 <= now <= signed_ms + int(expires) * 1000
        for now in clocks
    ):
        raise SqsError("RequestExpired", "Request has expired.", status=403)
    unsigned = "&".join(
        pair for pair in raw_query.split("&") if pair.partition("=")[0] != QUERY_SIGNATURE
    )
    return _check_signature(
        method=method,
        raw_path=raw_path,
        canonical_query=_canonical_query(unsigned),
        headers=headers,
        scope=Scope(
            credential["key"], credential["date"], credential["region"], credential["service"]
        ),
        signed_headers=signed_headers,
        amz_date=amz_date,
        payload_hash=hashlib.sha256(body).hexdigest(),
        signature=signature,
        lookup=lookup,
    )


def _check_signature(
    *,
    method: str,
    raw_path: str,
    canonical_query: str,
    headers: Mapping[str, str],
    scope: Scope,
    signed_headers: str,
    amz_date: str,
    payload_hash: str,
    signature: str,
    lookup: KeyLookup,
) -> Principal:
    key = lookup(scope.key)
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
            canonical_query,
            "".join(
                f"{h}:{_header_value(headers.get(h, ''))}\n" for h in signed_headers.split(";")
            ),
            signed_headers,
            payload_hash,
        ]
    )
    scope_text = f"{scope.date}/{scope.region}/{scope.service}/aws4_request"
    to_sign = "\n".join(
        [ALGORITHM, amz_date, scope_text, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    signing = _signing_key(secret, scope.date, scope.region, scope.service)
    expected = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise SqsError(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. "
            "Check your AWS Secret Access Key and signing method.",
            status=403,
        )
    return Principal(scope.key, permissions)


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


def _signed_at(amz_date: str, scope_date: str) -> datetime:
    """The time an ``X-Amz-Date`` names, checked against its credential scope's date."""
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise SqsError(
            "IncompleteSignature", "X-Amz-Date is missing or malformed.", status=403
        ) from None
    if not amz_date.startswith(scope_date):
        raise SqsError(
            "SignatureDoesNotMatch",
            "The credential scope date is not the request date.",
            status=403,
        )
    return signed_at
