"""The SDK's ``Transaction`` against a stand-in sender (no service needed)."""

from __future__ import annotations

import pytest


def test_the_sdk_retrying_a_send_with_a_lost_answer_reuses_its_part_and_ids():
    from cirrusmq.errors import MQError
    from cirrusmq.message import Message
    from cirrusmq.transaction import Transaction, TransactionReceipt

    sent: list[tuple[int, list[str]]] = []

    class LosesTheFirstAnswer:
        def _send(self, txn, part, messages, wire):
            sent.append((part, [w["message_id"] for w in wire]))
            if len(sent) == 1:
                raise MQError("the connection dropped", retriable=True)
            return [TransactionReceipt(w["message_id"], 0, txn.id) for w in wire]

    tx = Transaction(LosesTheFirstAnswer(), "t1")  # type: ignore[arg-type]
    message = Message("pay", b"x")
    with pytest.raises(MQError):
        tx.send(message)
    tx.send(message)  # the application retries the same call
    tx.send(Message("pay", b"y"))
    assert sent[0] == sent[1]  # same part, same ids: stored once on the service
    assert sent[2][0] == sent[0][0] + 1
