"""Signed requests and access keys against the local stack (skipped while the stack has no
keys API)."""

from __future__ import annotations

import pytest
from cirrusmq import (
    AccessDeniedError,
    Admin,
    AuthenticationError,
    Credentials,
    Message,
    NotFoundError,
    Permissions,
    Producer,
    SimpleConsumer,
    SubscribeGrant,
)
from cirrusmq.transport import RetryPolicy, Transport

from .conftest import unique


@pytest.fixture(scope="module")
def keys_api(admin: Admin) -> Admin:
    try:
        admin.list_access_keys()
    except NotFoundError:
        pytest.skip("this local stack has no access keys API yet")
    return admin


def test_a_key_may_do_what_its_permissions_say(endpoint, keys_api, make_topic, group):
    allowed, other = make_topic("pub"), make_topic("other")
    prefix = allowed.rsplit("-", 1)[0]
    key = keys_api.create_access_key(
        Permissions(
            publish=(allowed,),
            subscribe=(SubscribeGrant((f"{group[:4]}*",), (f"{prefix}-*",)),),
        ),
        "sdk test",
    )
    try:
        with Producer(endpoint, key.credentials, max_attempts=1) as producer:
            assert producer.send(Message(allowed, b"ok")).offset == 0
            with pytest.raises(AccessDeniedError) as denied:
                producer.send(Message(other, b"no"))
        assert denied.value.code == "AccessDenied" and other in str(denied.value)
        with SimpleConsumer(endpoint, key.credentials, group, [allowed], await_duration=1) as c:
            (message,) = c.receive(10, 30)
            assert c.ack(message).acked
        with Admin(endpoint, key.credentials) as limited, pytest.raises(AccessDeniedError):
            limited.create_topic(unique("nope"))
        listed = {k.access_key: k for k in keys_api.list_access_keys()}
        assert listed[key.access_key].description == "sdk test"
    finally:
        keys_api.delete_access_key(key.access_key)


def test_a_wrong_secret_or_no_signature_is_refused(endpoint, keys_api, credentials):
    wrong = Credentials(credentials.access_key, credentials.secret_key + "x")
    with Admin(endpoint, wrong, max_attempts=1) as admin, pytest.raises(AuthenticationError) as e:
        admin.list_topics()
    assert e.value.code == "InvalidSignature"
    transport = Transport(endpoint, None, retry=RetryPolicy(max_attempts=1))
    with Admin(endpoint, transport=transport) as unsigned, pytest.raises(AuthenticationError) as e:
        unsigned.list_topics()
    transport.close()
    assert e.value.code == "MissingSignature"


def test_a_disabled_key_is_refused_and_can_be_enabled(endpoint, keys_api):
    key = keys_api.create_access_key(Permissions(admin=True))
    try:
        with Admin(endpoint, key.credentials, max_attempts=1) as other:
            other.list_topics()
            assert keys_api.disable_access_key(key.access_key).status == "DISABLED"
            with pytest.raises(AuthenticationError) as refused:
                other.list_topics()
            assert refused.value.code == "InvalidSignature"
            assert keys_api.enable_access_key(key.access_key).active
            other.list_topics()
    finally:
        keys_api.delete_access_key(key.access_key)
