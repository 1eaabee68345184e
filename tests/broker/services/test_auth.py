"""Permissions (pure rules) and the authenticator / access keys on in-process moto + KMS."""

from __future__ import annotations

import hashlib
import hmac

import boto3
import pytest
from broker_helpers import resent_put
from cirrusmq_broker.errors import (
    InvalidRequest,
    InvalidSignature,
    KeyInUse,
    KeyNotFound,
    MissingSignature,
    ReplayedRequest,
    RequestExpired,
)
from cirrusmq_broker.rules.permissions import Permissions, matches
from cirrusmq_broker.services.auth import SignedRequest, canonical_query

GRANTS = Permissions.from_json(
    {
        "publish": ["orders", "audit-*"],
        "subscribe": [{"groups": ["billing"], "topics": ["orders", "pay-*"]}],
    }
)


def test_patterns_are_names_or_prefixes() -> None:
    assert matches("orders", "orders") and not matches("orders", "orders2")
    assert matches("audit-*", "audit-eu") and matches("*", "anything")
    assert not matches("audit-*", "audit")


def test_rules_deny_by_default() -> None:
    nothing = Permissions()
    assert not nothing.may_publish("orders") and not nothing.may_see_topic("orders")
    assert not nothing.may_subscribe_group("billing")
    assert Permissions(admin=True).may_subscribe("any", "thing")


def test_publish_and_subscribe_need_one_grant_matching_both() -> None:
    assert GRANTS.may_publish("audit-eu") and not GRANTS.may_publish("pay-1")
    assert GRANTS.may_subscribe("billing", "pay-1")
    assert not GRANTS.may_subscribe("shipping", "orders")
    assert not GRANTS.may_subscribe("billing", "audit-eu")
    assert GRANTS.may_see_topic("pay-1") and not GRANTS.may_see_topic("other")


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"admin": "yes"},
        {"publish": ["bad name"]},
        {"publish": "orders"},
        {"subscribe": [{"groups": [], "topics": ["t"]}]},
        {"subscribe": [{"groups": ["g"]}]},
        {"bogus": True},
        {"publish": ["a*b"]},
    ],
)
def test_malformed_permissions_are_invalid(document) -> None:
    with pytest.raises(InvalidRequest):
        Permissions.from_json(document)


def test_permissions_round_trip() -> None:
    assert Permissions.from_json(GRANTS.to_json()) == GRANTS


def test_canonical_query_sorts_and_encodes() -> None:
    assert canonical_query("b=2&a=x+y&a=%2F") == "a=%2F&a=x%20y&b=2"
    assert canonical_query("") == ""


def signed(secret: str, key: str, now_ms: int, *, body: bytes = b"{}", nonce: str = "n" * 22):
    date = _date(now_ms)
    request = SignedRequest("POST", "/v1/topics", "", {}, body)
    text = "\n".join(
        [
            "CIRRUS-HMAC-SHA256",
            "POST",
            "/v1/topics",
            "",
            date,
            nonce,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    signature = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
    headers = {
        "authorization": f"CIRRUS-HMAC-SHA256 Credential={key}, Signature={signature}",
        "x-cirrus-date": date,
        "x-cirrus-nonce": nonce,
    }
    return SignedRequest(request.method, request.path, "", headers, body)


def _date(now_ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(now_ms / 1000, UTC).strftime("%Y%m%dT%H%M%SZ")


def test_secrets_are_stored_encrypted_and_verify(broker, clock) -> None:
    key, secret = broker.access_keys.create(GRANTS, "unit")
    assert key.access_key.startswith("CMQ") and len(key.access_key) == 20
    items = boto3.client("dynamodb", region_name="us-east-1").scan(
        TableName=broker.settings.access_keys_table
    )["Items"]
    assert secret.encode() not in repr(items).encode()
    principal = broker.auth.authenticate(signed(secret, key.access_key, clock.now))
    assert principal.permissions == GRANTS


def test_every_failure_is_a_401(broker, clock) -> None:
    key, secret = broker.access_keys.create(GRANTS)
    with pytest.raises(MissingSignature):
        broker.auth.authenticate(SignedRequest("GET", "/v1/topics", "", {}, b""))
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate(signed("wrong", key.access_key, clock.now))
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate(signed(secret, "CMQUNKNOWN", clock.now))
    with pytest.raises(RequestExpired):
        broker.auth.authenticate(signed(secret, key.access_key, clock.now - 301_000))
    with pytest.raises(RequestExpired):
        broker.auth.authenticate(signed(secret, key.access_key, clock.now + 301_000))
    request = signed(secret, key.access_key, clock.now, nonce="r" * 22)
    broker.auth.authenticate(request)
    with pytest.raises(ReplayedRequest):
        broker.auth.authenticate(request)


def test_disable_enable_delete(broker, clock) -> None:
    key, secret = broker.access_keys.create(GRANTS)
    broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="a" * 22))
    assert broker.access_keys.set_enabled(key.access_key, False, caller="x").status == "DISABLED"
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="b" * 22))
    broker.access_keys.set_enabled(key.access_key, True, caller="x")
    broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="c" * 22))
    with pytest.raises(KeyInUse):
        broker.access_keys.delete(key.access_key, caller=key.access_key)
    broker.access_keys.delete(key.access_key, caller="x")
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="d" * 22))
    with pytest.raises(KeyNotFound):
        broker.access_keys.delete(key.access_key, caller="x")


def test_a_disabled_key_stops_within_the_cache_time_elsewhere(broker, clock) -> None:
    """Another process (container) disabling the key: this one notices within 60 s."""
    key, secret = broker.access_keys.create(GRANTS)
    broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="e" * 22))
    broker._access_keys.set_status(key.access_key, "DISABLED")  # not through this process
    clock.advance(61)
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="f" * 22))


def test_dates_are_checked_against_the_broker_clock_alone_which_the_refusal_gives(broker, clock):
    """A local stack whose time was advanced refuses a wall-clock date (its nonce would be
    forgotten on the broker clock while the date is still fresh on the wall clock: a replay
    window) and names its time in ``server_time``, which the SDK signs with from then on."""
    key, secret = broker.access_keys.create(GRANTS)
    wall = clock.now
    clock.advance(3_600)  # the broker clock, an hour ahead of the clients' wall clock
    with pytest.raises(RequestExpired) as refused:
        broker.auth.authenticate(signed(secret, key.access_key, wall))
    assert refused.value.details == {"server_time": clock.now}
    broker.auth.authenticate(signed(secret, key.access_key, clock.now, nonce="s" * 22))


def test_authenticate_with_checks_another_schemes_signature_with_the_keys_secret(broker) -> None:
    key, secret = broker.access_keys.create(GRANTS)
    principal = broker.auth.authenticate_with(key.access_key, lambda s: s == secret)
    assert principal.access_key == key.access_key and principal.permissions == GRANTS
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate_with(key.access_key, lambda s: False)
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate_with("CMQUNKNOWN", lambda s: True)
    broker.access_keys.set_enabled(key.access_key, False, caller="x")
    with pytest.raises(InvalidSignature):
        broker.auth.authenticate_with(key.access_key, lambda s: s == secret)


def test_a_nonce_put_resent_after_its_answer_was_lost_is_not_a_replay(broker, clock) -> None:
    """botocore resends the nonce's put when its answer is lost; the resend finds the item
    the first put wrote. That is this request's own nonce, not a replay; a replay of the
    request is still refused."""
    key, secret = broker.access_keys.create(GRANTS)
    request = signed(secret, key.access_key, clock.now, nonce="s" * 22)
    with resent_put(broker._dynamodb, broker.settings.nonces_table) as landed:
        principal = broker.auth.authenticate(request)
    assert landed and principal.permissions == GRANTS
    with pytest.raises(ReplayedRequest):
        broker.auth.authenticate(request)
