"""Access keys: ``Admin`` and ``cirrusmq key ...`` against a fake keys API (signed requests)."""

from __future__ import annotations

import json

import cirrusmq.cli.connection as commands
import httpx
import pytest
from cirrusmq import (
    AccessDeniedError,
    AccessKey,
    AccessKeySecret,
    Admin,
    ConflictError,
    Credentials,
    Permissions,
    SubscribeGrant,
    TransportError,
)
from cirrusmq.cli import app
from cirrusmq.transport import Transport
from typer.testing import CliRunner

from .signature_check import FAKE_CREDENTIALS, SignatureChecker


class FakeKeys:
    """The keys API as AUTH-SPEC.md has it; ``FAKE_CREDENTIALS`` is the (admin) caller."""

    def __init__(self) -> None:
        self.checker = SignatureChecker()
        self.keys: dict[str, dict] = {}
        self.requests: list[httpx.Request] = []
        self.deny = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        refusal = self.checker.check(request)
        if refusal is not None:
            return refusal
        if self.deny:
            return httpx.Response(
                403, json={"code": "AccessDenied", "message": "access denied: manage access keys"}
            )
        parts = request.url.path.split("/")[2:]  # after /v1
        if parts == ["keys"] and request.method == "POST":
            body = json.loads(request.content)
            key_id = f"CMQ{len(self.keys):017d}".replace("0", "A")
            self.keys[key_id] = {
                "access_key": key_id,
                "description": body["description"],
                "permissions": body["permissions"],
                "status": "ACTIVE",
                "created_timestamp": 1_700_000_000_000,
            }
            return httpx.Response(201, json={**self.keys[key_id], "secret_key": "s3cr3t"})
        if parts == ["keys"] and request.method == "GET":
            return httpx.Response(200, json={"keys": list(self.keys.values())})
        key_id = parts[1]
        if key_id == FAKE_CREDENTIALS.access_key:
            return httpx.Response(409, json={"code": "KeyInUse", "message": "your own key"})
        if key_id not in self.keys:
            return httpx.Response(404, json={"code": "KeyNotFound", "message": key_id})
        if request.method == "DELETE":
            del self.keys[key_id]
            return httpx.Response(204)
        self.keys[key_id]["status"] = "DISABLED" if parts[2] == "disable" else "ACTIVE"
        return httpx.Response(200, json=self.keys[key_id])


def make_admin(service: FakeKeys, endpoint: str = "http://fake", credentials=None) -> Admin:
    transport = Transport(endpoint, FAKE_CREDENTIALS, http_transport=httpx.MockTransport(service))
    return Admin(endpoint, FAKE_CREDENTIALS, transport=transport)


def test_admin_manages_keys():
    service = FakeKeys()
    permissions = Permissions(
        publish=("orders", "audit-*"),
        subscribe=(SubscribeGrant(("billing",), ("orders", "pay-*")),),
    )
    with make_admin(service) as admin:
        created = admin.create_access_key(permissions, "billing service")
        assert isinstance(created, AccessKeySecret)
        assert created.permissions == permissions and created.status == "ACTIVE"
        assert created.credentials == Credentials(created.access_key, "s3cr3t")
        assert "s3cr3t" not in repr(created)
        listed = admin.list_access_keys()
        assert [type(k) for k in listed] == [AccessKey]
        assert listed[0].description == "billing service" and listed[0].active
        assert admin.disable_access_key(created.access_key).status == "DISABLED"
        assert admin.enable_access_key(created.access_key).active
        with pytest.raises(ConflictError) as own:
            admin.delete_access_key(FAKE_CREDENTIALS.access_key)
        assert own.value.code == "KeyInUse"
        admin.delete_access_key(created.access_key)
        assert admin.list_access_keys() == []
    assert service.checker.refusals == []
    sent = json.loads(service.requests[0].content)
    assert sent == {
        "permissions": {
            "admin": False,
            "publish": ["orders", "audit-*"],
            "subscribe": [{"groups": ["billing"], "topics": ["orders", "pay-*"]}],
        },
        "description": "billing service",
    }
    assert [f"{r.method} {r.url.path}" for r in service.requests[2:4]] == [
        f"POST /v1/keys/{created.access_key}/disable",
        f"POST /v1/keys/{created.access_key}/enable",
    ]


def test_a_key_that_is_not_admin_gets_access_denied():
    service = FakeKeys()
    service.deny = True
    with make_admin(service) as admin, pytest.raises(AccessDeniedError) as denied:
        admin.list_access_keys()
    assert denied.value.code == "AccessDenied" and not denied.value.retriable
    assert len(service.requests) == 1


def test_permissions_round_trip_and_refuse_a_bare_string():
    p = Permissions(admin=True)
    assert Permissions.from_wire(p.to_wire()) == p and str(p) == "admin"
    assert Permissions().empty and str(Permissions()) == "nothing"
    with pytest.raises(TypeError):
        Permissions(publish="orders")
    with pytest.raises(TransportError, match="malformed"):
        AccessKey.from_wire({"access_key": "k", "status": "ACTIVE", "created_timestamp": 1})


# ---- the command line
@pytest.fixture
def cli(monkeypatch, tmp_path):
    service = FakeKeys()
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://fake")
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", FAKE_CREDENTIALS.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", FAKE_CREDENTIALS.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # no wrapped lines in tables and error boxes
    monkeypatch.setattr(
        commands, "Admin", lambda endpoint, credentials: make_admin(service, endpoint, credentials)
    )

    def run(*args: str, code: int = 0, input: str | None = None):
        result = CliRunner().invoke(app, list(args), input=input)
        assert result.exit_code == code, result.output
        return result

    run.service = service
    return run


def test_key_create_prints_the_secret_once_with_a_warning(cli):
    result = cli(
        "key",
        "create",
        "--publish",
        "orders",
        "--publish",
        "audit-*",
        "--subscribe",
        "billing:orders",
        "--subscribe",
        "ops-*:*",
        "--description",
        "billing",
    )
    assert "secret key   s3cr3t" in result.stdout
    assert "only time the secret key is shown" in result.stderr
    (key,) = cli.service.keys.values()
    assert key["permissions"] == {
        "admin": False,
        "publish": ["orders", "audit-*"],
        "subscribe": [
            {"groups": ["billing"], "topics": ["orders"]},
            {"groups": ["ops-*"], "topics": ["*"]},
        ],
    }
    listed = cli("key", "list")
    assert key["access_key"] in listed.stdout and "s3cr3t" not in listed.stdout
    as_json = json.loads(cli("key", "list", "--json").stdout)
    assert as_json[0]["permissions"] == key["permissions"] and "secret_key" not in as_json[0]


def test_key_create_json_and_admin(cli):
    created = json.loads(cli("key", "create", "--admin", "--json").stdout)
    assert created["secret_key"] == "s3cr3t" and created["permissions"]["admin"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "would allow nothing"),
        (("--subscribe", "billing"), "GROUP_PATTERN:TOPIC_PATTERN"),
        (("--subscribe", ":orders"), "GROUP_PATTERN:TOPIC_PATTERN"),
    ],
)
def test_key_create_refuses_useless_or_malformed_permissions(cli, args, message):
    result = cli("key", "create", *args, code=2)
    assert message in result.output
    assert cli.service.requests == []


def test_key_disable_enable_delete(cli):
    cli("key", "create", "--publish", "orders")
    (key_id,) = cli.service.keys
    assert f"access key {key_id} is DISABLED" in cli("key", "disable", key_id).stdout
    assert f"access key {key_id} is ACTIVE" in cli("key", "enable", key_id).stdout
    cli("key", "delete", key_id, input="n\n", code=1)  # not confirmed
    assert key_id in cli.service.keys
    assert f"deleted access key {key_id}" in cli("key", "delete", key_id, "--yes").stdout
    assert cli.service.keys == {}


def test_key_errors_are_one_line(cli):
    result = cli("key", "delete", FAKE_CREDENTIALS.access_key, "--yes", code=1)
    assert "[KeyInUse] your own key" in result.output
    result = cli("key", "disable", "CMQNOPE", code=1)
    assert "KeyNotFound" in result.output
