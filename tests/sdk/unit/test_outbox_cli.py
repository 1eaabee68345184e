"""`cirrusmq outbox list|retry|purge` on an outbox file (no service, or a fake one)."""

from __future__ import annotations

import json

import cirrusmq.cli.connection as commands
import pytest
from cirrusmq import Producer
from cirrusmq.cli import app
from cirrusmq.outbox import OutboxBatch, Refusal, SqliteOutbox
from cirrusmq.transport import Transport
from typer.testing import CliRunner

from .fake_service import FakeService


def refused_outbox(path, topics=("t", "t", "u")) -> list[int]:
    store = SqliteOutbox(path)
    ids = []
    for sequence, topic in enumerate(topics):
        payload = json.dumps(
            {
                "producer_id": "p-old",
                "sequence": sequence,
                "messages": [{"message_id": f"m{sequence}", "body": "eA=="}],
            },
            separators=(",", ":"),
        ).encode()
        entry = store.append(OutboxBatch(topic, "p-old", sequence, (f"m{sequence}",), payload))
        store.claim_heads()
        store.refuse(entry.entry_id, Refusal("TopicNotFound", f"no {topic}", 404, 0))
        ids.append(entry.entry_id)
    store.close()
    return ids


@pytest.fixture
def cli(monkeypatch, tmp_path):
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://fake")
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)

    def run(*args: str, code: int = 0, input: str | None = None):
        result = CliRunner().invoke(app, list(args), input=input)
        assert result.exit_code == code, result.output
        return result

    return run


def test_list_shows_the_refusals(cli, tmp_path):
    path = tmp_path / "o.db"
    ids = refused_outbox(path)
    listing = cli("outbox", "list", "--path", str(path)).output
    assert "TopicNotFound" in listing and "3 refused message(s) in 3 batch(es)" in listing
    rows = json.loads(cli("outbox", "list", "--path", str(path), "--json").output)
    assert [r["id"] for r in rows] == ids and rows[0]["code"] == "TopicNotFound"
    assert cli("outbox", "list", "--path", str(tmp_path / "none.db"), code=2)


def test_retry_without_sending_puts_them_back_in_line(cli, tmp_path):
    path = tmp_path / "o.db"
    ids = refused_outbox(path)
    out = cli("outbox", "retry", "--path", str(path), "--id", str(ids[2]), "--no-send").output
    assert "1 message(s) put back in line" in out
    store = SqliteOutbox(path)
    assert [e.entry_id for e in store.entries()] == [ids[2]]
    assert [r.entry_id for r in store.refused()] == ids[:2]
    store.close()


def test_retry_sends_them_and_purge_deletes(cli, tmp_path, monkeypatch):
    path = tmp_path / "o.db"
    ids = refused_outbox(path)
    service = FakeService()
    service.missing_topics = {"u"}  # still missing: refused again

    def fake_producer(endpoint, credentials, **options):
        transport = Transport(endpoint, service.credentials, http_transport=service.transport())
        return Producer(endpoint, credentials, transport=transport, **options)

    monkeypatch.setattr(commands, "Producer", fake_producer)
    result = cli("outbox", "retry", "--path", str(path), code=1)
    assert "retried 3 message(s); 0 still waiting, 1 refused" in result.stdout
    assert "TopicNotFound" in result.output
    assert [m["message_id"] for m in service.stored["t"]] == ["m0", "m1"]  # in order
    assert [(r["producer_id"], r["sequence"]) for r in service.requests] == [
        ("p-old", 0),
        ("p-old", 1),
    ]
    cli("outbox", "purge", "--path", str(path), input="n\n", code=1)  # asks first
    assert (
        "purged 1 message(s) in 1 batch(es)"
        in cli("outbox", "purge", "--path", str(path), "--yes").output
    )
    store = SqliteOutbox(path)
    assert store.refused() == [] and store.entries() == []
    store.close()
    assert ids
