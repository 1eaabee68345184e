"""Lookup by key through the local stack: SDK (Admin.find_by_key), CLI, permissions."""

from __future__ import annotations

import json

import pytest
from cirrusmq import Admin, Message, Permissions, Producer, SubscribeGrant
from cirrusmq.cli import app
from cirrusmq.errors import AccessDeniedError, BadRequestError
from typer.testing import CliRunner


def send_orders(endpoint, credentials, topic: str) -> list[str]:  # noqa: ANN001
    """Seven messages with key ``order-7`` among others, one request each (batches on
    several queues); the ids of the keyed ones, oldest first."""
    ids = []
    with Producer(endpoint, credentials) as producer:
        for i in range(7):
            ids.append(producer.send(Message(topic, f"o7-{i}", keys=("order-7",))).message_id)
            producer.send(Message(topic, f"o8-{i}", keys=("order-8", "x")))
    return ids


def test_find_by_key_pages_through_every_match_newest_first(
    endpoint,
    credentials,
    admin: Admin,
    make_topic,  # noqa: ANN001
) -> None:
    topic = make_topic("keys", queues=4)
    ids = send_orders(endpoint, credentials, topic)
    found = list(admin.find_by_key(topic, "order-7", page_size=2))
    assert [m.message_id for m in found] == ids[::-1]
    assert all("order-7" in m.keys and m.receipt_handle is None for m in found)
    stored = [m.stored_timestamp for m in found]
    assert stored == sorted(stored, reverse=True)
    first = admin.find_by_key_page(topic, "order-7", page_size=3)
    assert len(first.messages) <= 3 and first.next_page_token
    rest = admin.find_by_key_page(topic, "order-7", page_size=100, page_token=first.next_page_token)
    assert [m.message_id for m in first.messages + rest.messages] == ids[::-1]
    assert rest.next_page_token is None
    assert list(admin.find_by_key(topic, "order-7", end=found[-1].stored_timestamp - 1)) == []
    assert list(admin.find_by_key(topic, "absent")) == []


def test_bad_input_is_a_clear_400(admin: Admin, make_topic) -> None:  # noqa: ANN001
    topic = make_topic("keys-bad")
    with pytest.raises(BadRequestError) as token:
        admin.find_by_key_page(topic, "k", page_token="garbage")
    assert token.value.code == "InvalidPageToken"
    with pytest.raises(BadRequestError) as key:
        admin.find_by_key_page(topic, "")
    assert key.value.code == "InvalidMessage"
    with pytest.raises(BadRequestError) as size:
        admin.find_by_key_page(topic, "k", page_size=101)
    assert size.value.code == "InvalidRequest"


def test_a_lookup_needs_the_topics_read_grant(
    endpoint,
    credentials,
    admin: Admin,
    make_topic,  # noqa: ANN001
) -> None:
    topic = make_topic("keys-grant")
    send_orders(endpoint, credentials, topic)
    producer_key = admin.create_access_key(Permissions(publish=(topic,)), "find test")
    reader_key = admin.create_access_key(
        Permissions(subscribe=(SubscribeGrant(groups=("g",), topics=(topic,)),)), "find test"
    )
    try:
        with Admin(endpoint, producer_key.credentials) as narrow, pytest.raises(AccessDeniedError):
            narrow.find_by_key_page(topic, "order-7")
        with Admin(endpoint, reader_key.credentials) as reader:
            assert len(list(reader.find_by_key(topic, "order-7"))) == 7
            with pytest.raises(AccessDeniedError):
                reader.find_by_key_page(f"dlq.{'g'}", "order-7")
    finally:
        admin.delete_access_key(producer_key.access_key)
        admin.delete_access_key(reader_key.access_key)


def test_cli_message_find_prints_the_matches_newest_first(
    endpoint,
    credentials,
    make_topic,
    tmp_path,
    monkeypatch,  # noqa: ANN001
) -> None:
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", endpoint)
    monkeypatch.setenv("CIRRUSMQ_ACCESS_KEY", credentials.access_key)
    monkeypatch.setenv("CIRRUSMQ_SECRET_KEY", credentials.secret_key)
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    runner = CliRunner()

    def cli(*args: str) -> str:
        result = runner.invoke(app, list(args))
        assert result.exit_code == 0, result.output
        return result.stdout

    topic = make_topic("keys-cli", queues=2)
    ids = send_orders(endpoint, credentials, topic)
    lines = cli("message", "find", "--topic", topic, "--key", "order-7").splitlines()
    assert [line.split()[1] for line in lines] == ids[::-1]
    assert all("keys=order-7" in line for line in lines)
    rows = cli("message", "find", "--topic", topic, "--key", "order-8", "--json", "--max", "3")
    assert [json.loads(r)["body"] for r in rows.splitlines()] == ["o8-6", "o8-5", "o8-4"]
    bad = runner.invoke(app, ["message", "find", "--topic", topic, "--key", "k", "--begin", "x"])
    assert bad.exit_code != 0 and "not a timestamp" in bad.output
