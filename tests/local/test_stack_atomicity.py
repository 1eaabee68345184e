"""The local stack's moto keeps every committed write while concurrent transactions fail.

Plain ``moto.server`` does not: a failing ``TransactWriteItems`` restores a table backup
taken before it started, erasing writes other requests committed meanwhile (seen here as
400 successful puts leaving 397 items). The local stack serves moto one request at a time.
"""

from __future__ import annotations

import contextlib
import threading
import uuid


def test_failed_transactions_do_not_erase_concurrent_writes(cirrusmq_stack):
    ddb = cirrusmq_stack.boto3_client("dynamodb")
    table = f"atomicity-{uuid.uuid4().hex[:8]}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName=table, Item={"k": {"S": "taken"}})
    committed: list[str] = []

    def put(key: str) -> dict:
        return {
            "Put": {
                "TableName": table,
                "Item": {"k": {"S": key}},
                "ConditionExpression": "attribute_not_exists(k)",
            }
        }

    def writer(w: int) -> None:
        client = cirrusmq_stack.boto3_client("dynamodb")
        for i in range(40):
            client.transact_write_items(TransactItems=[put(f"{w}-{i}")])
            committed.append(f"{w}-{i}")

    def failer() -> None:
        client = cirrusmq_stack.boto3_client("dynamodb")
        for _ in range(60):
            with contextlib.suppress(client.exceptions.TransactionCanceledException):
                client.transact_write_items(TransactItems=[put("taken")])

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    threads += [threading.Thread(target=failer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = {
        item["k"]["S"]
        for page in ddb.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
    }
    assert set(committed) <= stored and len(committed) == 160
    ddb.delete_table(TableName=table)
