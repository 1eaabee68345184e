"""The broker fixtures' in-process moto under the broker's own threads: the delay release
moves queues and the receive reads groups in parallel, so requests from several threads must
reach moto's plain dicts one at a time, as the local stack's server serialises them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import boto3

WRITES = 100


def test_parallel_writes_and_queries_of_one_table_all_succeed(aws: None) -> None:
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    dynamodb.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                   {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                              {"AttributeName": "sk", "AttributeType": "N"}],
        BillingMode="PAY_PER_REQUEST",
    )  # fmt: skip

    def write(number: int) -> None:
        dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "t", "Item": {"pk": {"S": "p"}, "sk": {"N": str(number)}}}}
            ]
        )

    def scan(_: int) -> int:
        return len(dynamodb.query(
            TableName="t", KeyConditionExpression="pk = :p",
            ExpressionAttributeValues={":p": {"S": "p"}},
        )["Items"])  # fmt: skip

    with ThreadPoolExecutor(max_workers=4) as pool:
        writes = pool.map(write, range(WRITES))
        reads = pool.map(scan, range(WRITES))
        list(writes), list(reads)
    assert scan(0) == WRITES
