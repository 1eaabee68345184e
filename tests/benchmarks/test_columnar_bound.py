"""The columnar bound's steps do the work they are named for."""

from __future__ import annotations

import pytest
from cirrusmq_broker.errors import InvalidReceiptHandle
from cirrusmq_broker.rules.receipts import ReceiptHandle, ReceiptSigner
from columnar_bound import checked, lease_handles, lease_offsets, main, steps


def test_handles_sharing_a_lease_token_give_back_their_offsets() -> None:
    signer = ReceiptSigner("columnar-bound-secret")
    token = signer.encode(ReceiptHandle("g", "t", 0, 40, "lease-1", 1, 0))
    texts = lease_handles(token, 40, 3)
    assert lease_offsets(ReceiptSigner("columnar-bound-secret"), texts) == [40, 41, 42]
    forged = [text.replace(token, token[:-2] + "AA") for text in texts]
    with pytest.raises(InvalidReceiptHandle):
        lease_offsets(ReceiptSigner("columnar-bound-secret"), forged)


def test_the_bulk_checks_refuse_duplicate_ids() -> None:
    produce = dict((name, step) for name, step, _ in steps(4)["produce"])
    table = produce["IPC read"]()
    assert checked(table)
    twice = table.set_column(0, "message_id", table["message_id"].take([0, 0, 1, 2]))
    assert not checked(twice)


def test_every_step_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--messages", "8", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "one signed token per lease" in out and "Parquet encode" in out
