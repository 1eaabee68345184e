"""A local stack deployed with ``DynamoDbCapacity=provisioned`` (the steady-load profile):
the message path's tables are provisioned, the others on-demand, and produce, receive and
ack work through real HTTP; the functions' memory is a parameter too."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator

import pytest
from api_helpers import ack, b64, make_topic, receive, send, signed_client
from cirrusmq.testing import LocalStack

HOT_TABLES = {"LogIndexTable", "QueueHeadsTable", "GroupsTable", "ProducersTable", "NoncesTable"}


@pytest.fixture(scope="module")
def cirrusmq_stack() -> Iterator[LocalStack]:
    parameters = {"DynamoDbCapacity": "provisioned", "ProvisionedMinUnits": 3}
    with LocalStack(schedules=False, parameters=parameters) as stack:
        yield stack


def test_the_message_path_tables_are_provisioned(cirrusmq_stack: LocalStack) -> None:
    ddb = cirrusmq_stack.boto3_client("dynamodb")
    for logical_id, name in cirrusmq_stack.resources.items():
        if not logical_id.endswith("Table"):
            continue
        table = ddb.describe_table(TableName=name)["Table"]
        mode = table.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED")
        if logical_id in HOT_TABLES:
            assert mode == "PROVISIONED", logical_id
            assert table["ProvisionedThroughput"]["WriteCapacityUnits"] == 3
        else:
            assert mode == "PAY_PER_REQUEST", logical_id


def test_produce_receive_ack(cirrusmq_stack: LocalStack) -> None:
    topic = f"p-{uuid.uuid4().hex[:10]}"
    with signed_client(cirrusmq_stack) as api:
        make_topic(api, topic, queues=2)
        send(api, topic, *({"body": b64(f"m{i}".encode())} for i in range(5)))
        got = receive(api, "g", topic, max_messages=10)
        assert sorted(base64.b64decode(m["body"]) for m in got) == [
            f"m{i}".encode() for i in range(5)
        ]
        assert ack(api, "g", got).json()["acked"] == 5


def test_function_memory_size_is_a_parameter() -> None:
    with LocalStack(schedules=False, parameters={"FunctionMemorySize": 512}) as stack:
        memory = {name: fn.function.memory_size for name, fn in stack.functions.items()}
    assert memory["ProduceFunction"] == memory["ConsumeFunction"] == 512
    assert memory["SchedulerFunction"] == 256  # a function's own MemorySize stays its own
