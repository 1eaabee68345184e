"""Request signing: the published test vectors (docs/sdk.md), the canonical forms, and the
transport signing every attempt afresh over the bytes it sends."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import re
import time
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from cirrusmq import AuthenticationError, CirrusAuth, Credentials
from cirrusmq.signing import (
    canonical_query,
    format_date,
    new_nonce,
    parse_authorization,
    sign,
    string_to_sign,
)
from cirrusmq.transport import AsyncTransport, RetryPolicy, Transport

from .signature_check import FAKE_CREDENTIALS, SignatureChecker

# ---- the test vectors published in docs/sdk.md ("Request signing")
VECTOR_CREDENTIALS = Credentials("CMQABCDEFGHIJKLMNOPQ", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
VECTOR_NOW = datetime(2026, 11, 23, 1, 7, 0, tzinfo=UTC)
VECTOR_NONCE = "q2Z_vJ1c-8XkR0aY5mNt4w"
VECTORS = [
    pytest.param(
        "POST",
        "https://api.example.com/v1/groups/billing/receive?wait_seconds=0&b=%C3%A9+x&a=2&a=1",
        b'{"topic":"orders","max_messages":16}',
        "CIRRUS-HMAC-SHA256\n"
        "POST\n"
        "/v1/groups/billing/receive\n"
        "a=1&a=2&b=%C3%A9%20x&wait_seconds=0\n"
        "20261123T010700Z\n"
        "q2Z_vJ1c-8XkR0aY5mNt4w\n"
        "cd130f331ff77227b8aeb749faa4204bbccc17ae72574f087903cfd71d72c705",
        "179c1daa7c7b4781a58598d2a4ce4b297bfa16c673043173226cbe1a51783565",
        id="post-with-query",
    ),
    pytest.param(
        "GET",
        "https://api.example.com/v1/topics",
        b"",
        "CIRRUS-HMAC-SHA256\n"
        "GET\n"
        "/v1/topics\n"
        "\n"
        "20261123T010700Z\n"
        "q2Z_vJ1c-8XkR0aY5mNt4w\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "8e6f928447d9d5cf31de3f0f19b3dc5972e58cda5ee561ab1b37c95b3303798e",
        id="get-no-body",
    ),
]


@pytest.mark.parametrize(("method", "url", "body", "text", "expected"), VECTORS)
def test_vectors(method, url, body, text, expected):
    raw = httpx.URL(url).raw_path
    path, _, query = raw.partition(b"?")
    assert string_to_sign(method, path.decode(), query, "20261123T010700Z", VECTOR_NONCE, body) == (
        text
    )
    # independent of the SDK: plain HMAC over the expected text
    secret = VECTOR_CREDENTIALS.secret_key.encode()
    assert hmac.new(secret, text.encode(), hashlib.sha256).hexdigest() == expected
    headers = sign(method, url, body, VECTOR_CREDENTIALS, now=VECTOR_NOW, nonce=VECTOR_NONCE)
    assert headers == {
        "X-Cirrus-Date": "20261123T010700Z",
        "X-Cirrus-Nonce": VECTOR_NONCE,
        "Authorization": "CIRRUS-HMAC-SHA256 Credential=CMQABCDEFGHIJKLMNOPQ, "
        f"Signature={expected}",
    }


def test_date_format_accepts_datetimes_and_epoch_seconds():
    assert format_date(VECTOR_NOW) == "20261123T010700Z"
    assert format_date(VECTOR_NOW.astimezone(timezone(timedelta(hours=5)))) == "20261123T010700Z"
    assert format_date(VECTOR_NOW.timestamp()) == "20261123T010700Z"
    assert re.fullmatch(r"\d{8}T\d{6}Z", format_date())
    with pytest.raises(ValueError, match="timezone"):
        format_date(datetime(2026, 1, 1))


def test_nonces_are_fresh_and_well_formed():
    nonces = {new_nonce() for _ in range(1000)}
    assert len(nonces) == 1000
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", n) for n in nonces)
    with pytest.raises(ValueError, match="nonce"):
        sign("GET", "http://x/v1/topics", b"", FAKE_CREDENTIALS, nonce="short")


@pytest.mark.parametrize(
    ("query", "canonical"),
    [
        ("", ""),
        ("b=2&a=1", "a=1&b=2"),
        ("a=2&a=1&a=10", "a=1&a=10&a=2"),
        ("flag&x=", "flag=&x="),
        ("t=a+b", "t=a%20b"),
        ("t=a%20b", "t=a%20b"),
        ("t=%2B", "t=%2B"),
        ("k~-._=v*'()!", "k~-._=v%2A%27%28%29%21"),
        ("t=%c3%a9", "t=%C3%A9"),
        ("t=%2F%3a", "t=%2F%3A"),
    ],
)
def test_canonical_query(query, canonical):
    assert canonical_query(query) == canonical
    assert canonical_query(query.encode()) == canonical


def test_the_path_is_signed_as_sent_and_the_method_upper_case():
    one = sign("get", "http://x/v1/topics/a%2Fb", b"", FAKE_CREDENTIALS, now=0, nonce="n" * 16)
    two = sign("GET", "http://x/v1/topics/a%2Fb", b"", FAKE_CREDENTIALS, now=0, nonce="n" * 16)
    three = sign("GET", "http://x/v1/topics/a/b", b"", FAKE_CREDENTIALS, now=0, nonce="n" * 16)
    assert one == two and one != three


def test_the_authorization_header_parses_back():
    headers = sign("GET", "http://x/", b"", FAKE_CREDENTIALS)
    key, signature = parse_authorization(headers["Authorization"])
    assert key == FAKE_CREDENTIALS.access_key and re.fullmatch(r"[0-9a-f]{64}", signature)
    assert parse_authorization("Bearer abc") is None
    assert parse_authorization("CIRRUS-HMAC-SHA256 Credential=k, Signature=XYZ") is None


def test_the_auth_signs_streamed_bodies_too():
    checker = SignatureChecker()

    def handler(request: httpx.Request) -> httpx.Response:
        return checker.check(request) or httpx.Response(200, json={"ok": True})

    with httpx.Client(
        auth=CirrusAuth(FAKE_CREDENTIALS), transport=httpx.MockTransport(handler)
    ) as c:
        chunks = iter([b'{"a":', b"1}"])
        response = c.post(
            "http://x/v1/y", content=chunks, headers={"content-type": "application/json"}
        )
    assert response.status_code == 200 and checker.refusals == []


# ---- the transport
FAST = RetryPolicy(max_attempts=3, initial_backoff_ms=1, max_backoff_ms=2)


class Service:
    """Checks signatures; answers the scripted statuses first, then 200 with what it got."""

    def __init__(self, *answers: tuple[int, str], clock_offset_s: float = 0.0) -> None:
        import time

        self.checker = SignatureChecker(clock=lambda: time.time() + clock_offset_s)
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        refusal = self.checker.check(request)
        if refusal is not None:
            return refusal
        if self.answers:
            status, code = self.answers.pop(0)
            return httpx.Response(status, json={"code": code, "message": "scripted"})
        return httpx.Response(200, json={"path": request.url.raw_path.decode()})


def transport(service: Service, credentials: Credentials | None = FAKE_CREDENTIALS) -> Transport:
    return Transport(
        "http://cirrus.test", credentials, retry=FAST, http_transport=httpx.MockTransport(service)
    )


def test_every_request_is_signed_over_the_bytes_sent_with_json_content_type():
    service = Service()
    t = transport(service)
    t.request("POST", "/v1/topics/t/messages", json_body={"é": [1, 2]})
    t.request("GET", "/v1/groups/g", params={"topic": "a b+c"})
    t.request("POST", "/v1/x", content=b'{"raw":true}')
    assert service.checker.refusals == []
    post, get, raw = service.requests
    assert post.headers["content-type"] == "application/json"
    assert post.content == b'{"\\u00e9":[1,2]}'  # compact, ASCII: what was signed
    assert get.url.raw_path == b"/v1/groups/g?topic=a%20b%2Bc"  # RFC 3986, never '+'
    assert "content-type" not in get.headers
    assert raw.headers["content-type"] == "application/json"


def test_without_credentials_requests_go_unsigned():
    service = Service()
    with pytest.raises(AuthenticationError) as caught:
        transport(service, None).request("GET", "/v1/topics")
    assert caught.value.code == "MissingSignature" and not caught.value.retriable
    assert "authorization" not in service.requests[0].headers
    assert len(service.requests) == 1


def test_a_wrong_secret_is_an_invalid_signature_and_not_retried():
    service = Service()
    wrong = Credentials(FAKE_CREDENTIALS.access_key, "not-the-secret")
    with pytest.raises(AuthenticationError) as caught:
        transport(service, wrong).request("GET", "/v1/topics")
    assert caught.value.code == "InvalidSignature" and caught.value.http_status == 401
    assert len(service.requests) == 1


def test_each_retry_is_signed_afresh():
    service = Service((503, "Busy"), (500, "InternalError"))
    transport(service).request("POST", "/v1/topics/t/messages", json_body={"a": 1})
    assert len(service.requests) == 3
    nonces = [r.headers["x-cirrus-nonce"] for r in service.requests]
    assert len(set(nonces)) == 3 and service.checker.refusals == []
    assert len({r.content for r in service.requests}) == 1


def test_an_expired_request_is_resent_once_with_a_fresh_signature():
    service = Service((401, "RequestExpired"))
    assert transport(service).request("POST", "/v1/topics", json_body={}, idempotent=False)
    assert len(service.requests) == 2
    first, second = (r.headers["x-cirrus-nonce"] for r in service.requests)
    assert first != second


def test_a_replayed_request_is_not_sent_again():
    """With a random nonce, ReplayedRequest means this very request arrived before: its
    outcome is unknown, and sending it again could do it twice."""
    service = Service((401, "ReplayedRequest"))
    with pytest.raises(AuthenticationError) as caught:
        transport(service).request("POST", "/v1/topics", json_body={}, idempotent=False)
    assert caught.value.code == "ReplayedRequest"
    assert len(service.requests) == 1


def test_a_clock_far_off_raises_request_expired_with_a_hint():
    service = Service(clock_offset_s=-1000)  # this machine is ~1000 s ahead of the service

    def handler(request: httpx.Request) -> httpx.Response:
        response = service(request)
        service_now = datetime.now(UTC) - timedelta(seconds=1000)
        response.headers["date"] = service_now.strftime("%a, %d %b %Y %H:%M:%S GMT")
        return response

    t = Transport(
        "http://x", FAKE_CREDENTIALS, retry=FAST, http_transport=httpx.MockTransport(handler)
    )
    with pytest.raises(AuthenticationError) as caught:
        t.request("GET", "/v1/topics")
    error = caught.value
    assert error.code == "RequestExpired" and not error.retriable
    assert len(service.requests) == 2  # resent once, then raised
    assert "clock" in str(error) and "ahead" in str(error)
    assert 990 <= error.clock_skew_s <= 1010


def test_after_request_expired_with_server_time_the_sdk_signs_on_the_service_clock():
    """A local stack whose time was advanced (or a machine whose clock is off) answers
    RequestExpired with its time: the transport signs with it from then on, sync and async.
    An hour's offset is adopted from a loopback endpoint (the local stack) only."""
    offset_s = 3_600.0  # the service runs an hour ahead of this machine

    def handler(request: httpx.Request) -> httpx.Response:
        service.requests.append(request)
        refusal = service.checker.check(request)
        if refusal is not None:
            server_ms = int((time.time() + offset_s) * 1000)
            body = {**refusal.json(), "details": {"server_time": server_ms}}
            return httpx.Response(refusal.status_code, json=body)
        return httpx.Response(200, json={"ok": True})

    service = Service(clock_offset_s=offset_s)
    t = Transport(
        "http://127.0.0.1:4566",
        FAKE_CREDENTIALS,
        retry=FAST,
        http_transport=httpx.MockTransport(handler),
    )
    assert t.request("GET", "/v1/topics") == {"ok": True}
    assert t.request("GET", "/v1/topics") == {"ok": True}
    assert len(service.requests) == 3  # refused once, then every request on its clock

    async def scenario() -> object:
        a = AsyncTransport(
            "http://127.0.0.1:4566",
            FAKE_CREDENTIALS,
            retry=FAST,
            http_transport=httpx.MockTransport(handler),
        )
        try:
            return await a.request("GET", "/v1/topics")
        finally:
            await a.close()

    assert asyncio.run(scenario()) == {"ok": True}
    assert len(service.requests) == 5


def test_the_async_transport_signs_and_resends_too():
    service = Service((401, "RequestExpired"), (503, "Busy"))

    async def scenario() -> object:
        t = AsyncTransport(
            "http://x", FAKE_CREDENTIALS, retry=FAST, http_transport=httpx.MockTransport(service)
        )
        try:
            return await t.request("POST", "/v1/a", json_body={"k": "v"}, params={"q": "1 2"})
        finally:
            await t.close()

    assert asyncio.run(scenario()) == {"path": "/v1/a?q=1%202"}
    assert len(service.requests) == 3 and service.checker.refusals == []
    assert len({r.headers["x-cirrus-nonce"] for r in service.requests}) == 3


# ---- the service clock the SDK follows: bounded, integer server_time only
AHEAD_S = 30 * 24 * 3600
ONE_RETRY = RetryPolicy(max_attempts=2, initial_backoff_ms=1, max_backoff_ms=2)


def _hostile_endpoint(captured: list[httpx.Request]):
    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        if len(captured) == 1:  # unsigned, unauthenticated "RequestExpired"
            server_ms = int((time.time() + AHEAD_S) * 1000)
            return httpx.Response(
                401,
                json={
                    "code": "RequestExpired",
                    "message": "sign again",
                    "details": {"server_time": server_ms},
                },
            )
        return httpx.Response(201, json={"access_key": "x", "secret_key": "y"})

    return handler


def _signed_at(request: httpx.Request) -> float:
    date = request.headers["X-Cirrus-Date"]
    return datetime.strptime(date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp()


def test_a_request_expired_from_a_remote_endpoint_moves_the_signing_clock_300_s_at_most():
    """A ``RequestExpired`` answer is not authenticated: from anything but a loopback endpoint
    the SDK adopts its ``server_time`` only within the 300 s skew window, so a hostile endpoint
    cannot obtain requests signed 30 days ahead (replayable at the real service then)."""
    captured: list[httpx.Request] = []
    t = Transport(
        "http://cirrus.test",
        FAKE_CREDENTIALS,
        retry=ONE_RETRY,
        http_transport=httpx.MockTransport(_hostile_endpoint(captured)),
    )
    with contextlib.suppress(Exception):  # refusing the request is an acceptable outcome
        t.request(
            "POST", "/v1/keys", json_body={"permissions": {"admin": True}, "description": "x"}
        )
    future = [r for r in captured if _signed_at(r) > time.time() + 24 * 3600]
    assert future == [], (
        f"the SDK signed {len(future)} request(s) dated "
        f"{[r.headers['X-Cirrus-Date'] for r in future]} for a hostile endpoint"
    )


def _one_hostile_answer(server_time: object, date_header: str | None = None):
    """A handler answering the first request with RequestExpired(server_time), then 200 to
    requests dated within 300 s of this machine's clock (a service whose clock is right),
    RequestExpired with the true time otherwise."""
    captured: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        captured.append(request)
        headers = {"Date": date_header} if date_header else {}
        if len(captured) == 1:
            body = {
                "code": "RequestExpired",
                "message": "x",
                "details": {"server_time": server_time},
            }
            return httpx.Response(401, json=body, headers=headers)
        if abs(_signed_at(request) - time.time()) > 300:
            body = {
                "code": "RequestExpired",
                "message": "x",
                "details": {"server_time": int(time.time() * 1000)},
            }
            return httpx.Response(401, json=body)
        return httpx.Response(200, json={"ok": True})

    return captured, handler


def test_an_absurd_server_time_is_not_adopted_and_never_breaks_signing():
    captured, handler = _one_hostile_answer(10**15)  # ms: the year 33658
    t = Transport(
        "http://cirrus.test",
        FAKE_CREDENTIALS,
        retry=ONE_RETRY,
        http_transport=httpx.MockTransport(handler),
    )
    outcomes = []
    for _ in range(3):
        try:
            outcomes.append(t.request("GET", "/v1/topics"))
        except Exception as exc:  # noqa: BLE001
            outcomes.append(type(exc).__name__)
    assert outcomes[-1] == {"ok": True}, outcomes


def test_only_an_integer_server_time_moves_the_signing_clock_never_a_date_header():
    ahead = time.time() + AHEAD_S
    header = datetime.fromtimestamp(ahead, UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
    captured, handler = _one_hostile_answer("not a number", header)
    t = Transport(
        "http://cirrus.test",
        FAKE_CREDENTIALS,
        retry=ONE_RETRY,
        http_transport=httpx.MockTransport(handler),
    )
    before = int(time.time())
    with contextlib.suppress(Exception):
        t.request("GET", "/v1/topics")
    after = int(time.time()) + 1
    dates = [r.headers["X-Cirrus-Date"] for r in captured]
    # signed on the machine's own clock, however long the requests took: never the header's
    signed = [_signed_at(r) for r in captured]
    assert all(before <= at <= after for at in signed), dates


@pytest.mark.parametrize(
    ("endpoint", "offset_s", "followed"),
    [
        ("http://localhost:4566", 3_600, True),
        ("http://127.0.0.2:4566", -3_600, True),
        ("http://[::1]:4566", 3_600, True),
        ("https://api.example.com", 240, True),
        ("https://api.example.com", 3_600, False),
        ("http://10.0.0.1:4566", -3_600, False),
    ],
)
def test_the_service_clock_is_followed_any_distance_from_loopback_only(
    endpoint, offset_s, followed
):
    """Any offset from the local stack (127.0.0.0/8, ::1, localhost); elsewhere only within
    the 300 s a signature's date may be off anyway."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if len(requests) == 1:
            server_ms = int((time.time() + offset_s) * 1000)
            body = {"code": "RequestExpired", "message": "x", "details": {"server_time": server_ms}}
            return httpx.Response(401, json=body)
        return httpx.Response(200, json={"ok": True})

    t = Transport(
        endpoint, FAKE_CREDENTIALS, retry=FAST, http_transport=httpx.MockTransport(handler)
    )
    assert t.request("GET", "/v1/topics") == {"ok": True}
    signed_offset = _signed_at(requests[1]) - time.time()
    assert abs(signed_offset - (offset_s if followed else 0)) < 30, signed_offset
