"""The CLI on an 80-column terminal and its destructive commands, with stand-in clients.

Tables keep the ids a user copies whole and cut long text to one line; every command that
deletes or discards something asks first, and ``--yes`` skips the question.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import cirrusmq.cli.connection as commands
import pytest
from cirrusmq import NotFoundError
from cirrusmq.admin import Permissions
from cirrusmq.admin.dead_letters import DeadLetter, DeadLetterPage
from cirrusmq.cli import app
from cirrusmq.cli.tables import Field, fitted
from cirrusmq.outbox import SqliteOutbox
from cirrusmq.transaction import OpenTransaction
from rich.cells import cell_len
from typer.main import get_command
from typer.testing import CliRunner

LONG_REASON = (
    "invisible duration expired 16 times; the last consumer was "
    "worker-7.billing.internal@4242@deadbeef, which acked nothing of it in 60 s\n" * 3
)
MESSAGE_IDS = ["01JDQ3W5Z8X4N2K7M9P1R6T0VA", "01JDQ3W5Z8X4N2K7M9P1R6T0VB"]


def _dead_letter(offset: int, message_id: str) -> DeadLetter:
    return DeadLetter.from_wire(
        {
            "dlq_offset": offset,
            "message_id": message_id,
            "origin_topic": "orders-from-the-eu-west-storefront",
            "origin_queue": 7,
            "origin_offset": 1234567,
            "delivery_attempts": 16,
            "reason": LONG_REASON,
            "stored_timestamp": 1_790_000_000_000,
            "born_timestamp": 1_789_999_000_000,
            "tag": "TagA",
            "keys": [],
            "body_preview": base64.b64encode(b'{"order": 1, "lines": [1, 2, 3]}' * 4).decode(),
            "body_bytes": 128,
            "redriven": offset == 0,
        }
    )


class FakeClient:
    """Any client: records the calls; listings answer with long ids, the rest raise."""

    calls: list[str] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def list_dead_letters(self, group, topic=None, *, limit=100, start=0) -> DeadLetterPage:
        letters = tuple(_dead_letter(i, m) for i, m in enumerate(MESSAGE_IDS))
        return DeadLetterPage(letters, None)

    def list_open(self, producer_group) -> list[OpenTransaction]:
        return [
            OpenTransaction(
                producer_group=producer_group,
                transaction_id=message_id,
                transactional_id=f"checkout-service-eu-west-1-{message_id}",
                topic="payments-eu-west",
                state="OPEN",
                created_timestamp=1_790_000_000_000,
                age_seconds=12.5,
                message_count=12,
                checks=2,
                max_checks=15,
                next_check_timestamp=1_790_000_030_000,
            )
            for message_id in MESSAGE_IDS
        ]

    def __getattr__(self, name: str):
        def call(*args: object, **kwargs: object):
            FakeClient.calls.append(name)
            raise NotFoundError(f"reached {name}", code="Reached")

        return call


@pytest.fixture
def cli(monkeypatch, tmp_path):
    monkeypatch.setenv("CIRRUSMQ_CONFIG", str(tmp_path / "config"))
    monkeypatch.setenv("CIRRUSMQ_ENDPOINT", "http://fake")
    monkeypatch.delenv("CIRRUSMQ_PROFILE", raising=False)
    for name in ("Admin", "TransactionAdmin", "Producer"):
        monkeypatch.setattr(commands, name, FakeClient)
    FakeClient.calls = []
    runner = CliRunner(env={"COLUMNS": "80"})

    def run(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input)

    return run


def _assert_fits(text: str, width: int = 80) -> None:
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, "\n".join(too_wide)


def test_dlq_list_keeps_ids_whole_and_cuts_the_reason_to_one_line(cli) -> None:
    result = cli("dlq", "list", "billing")
    assert result.exit_code == 0, result.output
    _assert_fits(result.stdout)
    for message_id in MESSAGE_IDS:
        assert message_id in result.stdout
    rows = [line for line in result.stdout.splitlines() if any(m in line for m in MESSAGE_IDS)]
    assert len(rows) == 2 and all("…" in row for row in rows), result.stdout
    assert "acked nothing" not in result.stdout  # the reason is cut, not wrapped
    body_lines = [line for line in result.stdout.splitlines() if line.startswith("│")]
    assert len(body_lines) == 2, result.stdout  # one line a row
    assert "--json" in result.stderr and "reason" in result.stderr and "origin" in result.stderr


def test_txn_list_keeps_transaction_ids_whole(cli) -> None:
    result = cli("txn", "list", "checkout")
    assert result.exit_code == 0, result.output
    _assert_fits(result.stdout)
    for message_id in MESSAGE_IDS:
        assert re.search(rf"│ {message_id} │", result.stdout), result.stdout
    assert "not shown: producer" in result.stderr and "--json" in result.stderr


def test_a_wide_terminal_shows_every_column_whole() -> None:
    fields = [Field("id", "id"), Field("reason", "text"), Field("extra", optional=True)]
    wide = fitted(fields, [["x" * 30, "because " * 10, "1"]], 200)
    assert (wide.hidden, wide.cut, wide.note()) == ([], [], None)
    narrow = fitted(fields, [["x" * 30, "because " * 10, "1"]], 50)
    assert narrow.hidden == ["extra"] and narrow.cut == ["reason"]


def test_an_id_wider_than_the_terminal_folds_instead_of_losing_characters() -> None:
    from rich.console import Console

    console = Console(width=40, record=True, soft_wrap=True)
    identifier = "0123456789" * 6
    console.print(fitted([Field("id", "id"), Field("n")], [[identifier, "1"]], 40).table)
    text = console.export_text()
    _assert_fits(text, 40)
    assert "".join(re.findall(r"│ ([0-9]+) *│", text)) == identifier


def test_key_list_cuts_descriptions_not_access_keys(cli, monkeypatch) -> None:
    from cirrusmq.admin import AccessKey

    key = AccessKey(
        access_key="CMQABCDEFGHIJKLMNOPQ",
        description="the billing service's consumer in eu-west-1, owned by the payments team",
        permissions=Permissions(publish=("orders-*", "payments-*", "refunds-*")),
        status="ACTIVE",
        created_timestamp=1_790_000_000_000,
    )
    monkeypatch.setattr(FakeClient, "list_access_keys", lambda self: [key], raising=False)
    result = cli("key", "list")
    assert result.exit_code == 0, result.output
    _assert_fits(result.stdout)
    assert "CMQABCDEFGHIJKLMNOPQ" in result.stdout


def test_topic_list_keeps_long_topic_names_whole(cli, monkeypatch) -> None:
    from cirrusmq.admin import Topic

    names = [f"orders-from-the-eu-west-storefront-{region}" for region in ("a", "b")]
    topics = [Topic(name, 8, "TRANSACTION", 2160, 1_790_000_000_000) for name in names]
    monkeypatch.setattr(FakeClient, "list_topics", lambda self: topics, raising=False)
    result = cli("topic", "list")
    assert result.exit_code == 0, result.output
    _assert_fits(result.stdout)
    assert all(name in result.stdout for name in names), result.stdout
    assert "not shown: created" in result.stderr


DESTRUCTIVE = {
    ("topic", "delete"): ["orders"],
    ("key", "delete"): ["CMQABCDEFGHIJKLMNOPQ"],
    ("offsets", "reset"): ["billing", "orders", "--to", "earliest"],
    ("dlq", "purge"): ["billing"],
    ("txn", "rollback"): ["checkout", MESSAGE_IDS[0]],
    ("cancel-scheduled",): ["orders", MESSAGE_IDS[0], "--at", "1790000000000"],
    ("outbox", "purge"): [],
}
"""Every command that deletes or discards something, with arguments that reach the client."""


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every leaf command of the CLI by its path (typer's groups have ``commands``)."""
    found: dict[tuple[str, ...], Any] = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found |= _commands(command, (*prefix, name))
        else:
            found[(*prefix, name)] = command
    return found


def test_the_commands_that_take_yes_are_the_destructive_ones() -> None:
    commands_with_yes = {
        path
        for path, command in _commands(get_command(app)).items()
        if any("--yes" in p.opts for p in command.params)
    }
    assert commands_with_yes == set(DESTRUCTIVE)


@pytest.mark.parametrize("path", sorted(DESTRUCTIVE), ids=" ".join)
def test_a_destructive_command_asks_first_and_yes_skips_the_question(
    cli, path, tmp_path: Path
) -> None:
    args = list(path) + DESTRUCTIVE[path]
    if path == ("outbox", "purge"):
        SqliteOutbox(tmp_path / "outbox.db").close()
        args += ["--path", str(tmp_path / "outbox.db")]
    declined = cli(*args, input="n\n")
    assert declined.exit_code == 1 and "Aborted" in declined.output, declined.output
    assert FakeClient.calls == []
    assert "?" in declined.output  # the question names what would be lost
    confirmed = cli(*args, "--yes")
    if path == ("outbox", "purge"):
        assert confirmed.exit_code == 0 and "purged 0 message(s)" in confirmed.output
    else:
        assert confirmed.exit_code == 1 and "reached" in confirmed.output, confirmed.output
        assert len(FakeClient.calls) == 1
