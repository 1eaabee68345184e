"""The check-then-apply ``TransactWriteItems`` patch answers exactly as moto did, without
deep-copying tables; each scenario runs on moto's own implementation and on the patch."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from cirrusmq_local import moto_patches
from moto import mock_aws
from moto.dynamodb.models import Table

Scenario = Callable[[Any], None]


def _tables(ddb: Any) -> None:
    ddb.create_table(
        TableName="h",
        KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.create_table(
        TableName="hr",
        KeySchema=[
            {"AttributeName": "s", "KeyType": "HASH"},
            {"AttributeName": "o", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "s", "AttributeType": "S"},
            {"AttributeName": "o", "AttributeType": "N"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName="h", Item={"k": {"S": "a"}, "n": {"N": "1"}, "s": {"S": "x"}})
    ddb.put_item(TableName="hr", Item={"s": {"S": "q"}, "o": {"N": "0"}, "v": {"S": "first"}})


def _put(table: str, item: dict[str, Any], condition: str | None = None, **extra: Any) -> dict:
    op: dict[str, Any] = {"TableName": table, "Item": item, **extra}
    if condition:
        op["ConditionExpression"] = condition
    return {"Put": op}


NEW_KEY = "attribute_not_exists(k)"

SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "all pass": [
        _put("h", {"k": {"S": "b"}}, NEW_KEY),
        _put("hr", {"s": {"S": "q"}, "o": {"N": "1"}}, "attribute_not_exists(o)"),
        {
            "Update": {
                "TableName": "h",
                "Key": {"k": {"S": "a"}},
                "UpdateExpression": "SET n = n + :one, t = :t",
                "ConditionExpression": "n = :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}, ":t": {"S": "y"}},
            }
        },
        {"Delete": {"TableName": "hr", "Key": {"s": {"S": "q"}, "o": {"N": "0"}}}},
    ],
    "update creates an item": [
        {
            "Update": {
                "TableName": "h",
                "Key": {"k": {"S": "new"}},
                "UpdateExpression": "ADD c :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": "h",
                "Key": {"k": {"S": "a"}},
                "ConditionExpression": "attribute_exists(k)",
            }
        },
    ],
    "condition fails, ALL_OLD": [
        _put("h", {"k": {"S": "b"}}, NEW_KEY),
        _put("h", {"k": {"S": "a"}}, NEW_KEY, ReturnValuesOnConditionCheckFailure="ALL_OLD"),
        {
            "Update": {
                "TableName": "h",
                "Key": {"k": {"S": "c"}},
                "UpdateExpression": "SET n = :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    ],
    "condition fails, no ALL_OLD": [
        _put("h", {"k": {"S": "a"}}, NEW_KEY),
        _put("h", {"k": {"S": "b"}}, NEW_KEY),
    ],
    "ALL_OLD on a missing item": [
        {
            "ConditionCheck": {
                "TableName": "h",
                "Key": {"k": {"S": "zz"}},
                "ConditionExpression": "attribute_exists(k)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
    ],
    "two conditions fail": [
        {
            "Delete": {
                "TableName": "hr",
                "Key": {"s": {"S": "q"}, "o": {"N": "0"}},
                "ConditionExpression": "v = :v",
                "ExpressionAttributeValues": {":v": {"S": "other"}},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        },
        _put("h", {"k": {"S": "b"}}, NEW_KEY),
        _put("h", {"k": {"S": "a"}}, NEW_KEY, ReturnValuesOnConditionCheckFailure="ALL_OLD"),
    ],
    "duplicate item": [
        _put("h", {"k": {"S": "b"}}),
        {"Delete": {"TableName": "h", "Key": {"k": {"S": "b"}}}},
    ],
    "too many items": [_put("h", {"k": {"S": f"i{i}"}}) for i in range(101)],
    "missing table in a delete": [
        _put("h", {"k": {"S": "b"}}),
        {"Delete": {"TableName": "nope", "Key": {"k": {"S": "b"}}}},
    ],
    "wrong key type": [_put("h", {"k": {"N": "1"}})],
    "update adds to a string": [
        _put("h", {"k": {"S": "b"}}),
        {
            "Update": {
                "TableName": "h",
                "Key": {"k": {"S": "a"}},
                "UpdateExpression": "ADD s :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
    ],
    "update of a key attribute": [
        {
            "Update": {
                "TableName": "h",
                "Key": {"k": {"S": "a"}},
                "UpdateExpression": "SET k = :v",
                "ExpressionAttributeValues": {":v": {"S": "b"}},
            }
        },
    ],
    "condition fails after a valid update": [
        {
            "Update": {
                "TableName": "h",
                "Key": {"k": {"S": "a"}},
                "UpdateExpression": "SET n = :two",
                "ExpressionAttributeValues": {":two": {"N": "2"}},
            }
        },
        _put("hr", {"s": {"S": "q"}, "o": {"N": "0"}}, "attribute_not_exists(o)"),
    ],
}


def _outcome(patched: bool, items: list[dict[str, Any]]) -> tuple[Any, Any]:
    (moto_patches.apply if patched else moto_patches.revert)()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _tables(ddb)
        try:
            ddb.transact_write_items(TransactItems=copy.deepcopy(items))
            answer: Any = "ok"
        except ClientError as exc:
            error = exc.response["Error"]
            answer = (error["Code"], error.get("Message"), exc.response.get("CancellationReasons"))
        state = {
            table: sorted(repr(sorted(item.items())) for item in ddb.scan(TableName=table)["Items"])
            for table in ("h", "hr")
        }
    return answer, state


@pytest.fixture(autouse=True)
def _restore_moto() -> Any:
    applied = moto_patches.is_applied()
    yield
    (moto_patches.apply if applied else moto_patches.revert)()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_patch_answers_and_stores_what_moto_did(name: str) -> None:
    expected = _outcome(False, SCENARIOS[name])
    assert _outcome(True, SCENARIOS[name]) == expected


def test_scenarios_cover_success_cancellation_and_validation() -> None:
    answers = {name: _outcome(True, items)[0] for name, items in SCENARIOS.items()}
    assert answers["all pass"] == "ok" and answers["update creates an item"] == "ok"
    code, _, reasons = answers["condition fails, ALL_OLD"]
    assert code == "TransactionCanceledException"
    assert [r["Code"] for r in reasons] == ["None", "ConditionalCheckFailed", "None"]
    assert reasons[1]["Item"] == {"k": {"S": "a"}, "n": {"N": "1"}, "s": {"S": "x"}}
    assert "Item" not in answers["condition fails, no ALL_OLD"][2][0]
    assert answers["duplicate item"][0] == "ValidationException"
    assert answers["too many items"][0] == "ValidationException"
    assert answers["missing table in a delete"][2][1]["Code"] == "ResourceNotFoundException"


def test_patch_never_deep_copies_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    real = copy.deepcopy

    def guarded(value: Any, *args: Any) -> Any:
        assert not isinstance(value, Table), "a table was deep-copied"
        return real(value, *args)

    moto_patches.apply()
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        _tables(ddb)
        monkeypatch.setattr("copy.deepcopy", guarded)
        ddb.transact_write_items(TransactItems=SCENARIOS["all pass"])
        with pytest.raises(ClientError):
            ddb.transact_write_items(TransactItems=SCENARIOS["condition fails, ALL_OLD"])
        assert ddb.get_item(TableName="h", Key={"k": {"S": "a"}})["Item"]["n"] == {"N": "2"}
