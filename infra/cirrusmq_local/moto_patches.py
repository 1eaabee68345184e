"""moto's DynamoDB ``TransactWriteItems``, check-then-apply: no table snapshot, no rollback.

moto (5.x) deep-copies every table a transaction touches before it starts (tens to hundreds
of milliseconds once a table holds thousands of items) and, when a condition fails, puts the
copy back — erasing whatever other requests committed in the meantime. :func:`transact_write_items`
replaces it: it first checks every item in request order — one operation per item, no two
items on one key, the table exists, the condition holds, and the write itself is valid,
computed on a private copy of that one item — and only when every item passed does it store
the new items. Nothing is written before the decision, so nothing needs undoing.

What a client sees is what moto answered before: ``ValidationException`` for more than 100
items, two operations in one item or two items on one key (and for any other validation
error, which moto raises directly); otherwise ``TransactionCanceledException`` with one
``CancellationReasons`` entry per item (``ConditionalCheckFailed`` with ``Item`` when
``ReturnValuesOnConditionCheckFailure`` is ``ALL_OLD`` and the item exists; ``None`` for
the items that passed). One deliberate difference: an ``Update`` that creates an item adds
one stream record, where moto added two (the key-only item, then the update).

:func:`delete_object` (S3) also drops a deleted object's tags, which moto keeps forever.

The apply phase is plain dict assignment; atomicity against other requests comes from the
caller (the server serialises writes per table, see :mod:`cirrusmq_local.moto_serial`).
:func:`apply` installs the patch (idempotent).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import Any

from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    ItemSizeTooLarge,
    ItemSizeToUpdateTooLarge,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
from moto.dynamodb.parsing.expressions import UpdateExpressionParser  # type: ignore[attr-defined]
from moto.dynamodb.parsing.validators import UpdateExpressionValidator
from moto.s3.models import S3Backend

__all__ = ["apply", "is_applied", "transact_write_items"]

_ORIGINAL = DynamoDBBackend.transact_write_items
_ORIGINAL_S3_DELETE = S3Backend.delete_object
_OPERATIONS = frozenset({"ConditionCheck", "Put", "Delete", "Update"})
_DELETE = object()  # plan marker: remove the item


def _shadow(table: Table, current: Item | None) -> Table:
    """A shallow copy of ``table`` whose items are only a private copy of ``current``: moto's
    own validation and update code run on it without touching the real table."""
    shadow = copy.copy(table)
    shadow.items = defaultdict(dict)
    shadow.stream_shard = None
    if current is not None:
        if table.range_key_attr is not None:
            shadow.items[current.hash_key][current.range_key] = copy.deepcopy(current)
        else:
            shadow.items[current.hash_key] = copy.deepcopy(current)
    return shadow


def _updated_item(
    table: Table, key: dict[str, Any], current: Item | None, op: dict[str, Any]
) -> Item:
    """The item an ``Update`` would leave, computed as moto's ``update_item`` does, on a copy."""
    update_expression = op["UpdateExpression"]
    names = op.get("ExpressionAttributeNames")
    values = op.get("ExpressionAttributeValues")
    ast = UpdateExpressionParser.make(update_expression) if update_expression else None
    if table.hash_key_attr in key and table.range_key_attr in key:
        hash_value = DynamoType(key[table.hash_key_attr])
        range_value: DynamoType | None = DynamoType(key[table.range_key_attr])  # type: ignore[index]
    elif table.hash_key_attr in key:
        hash_value, range_value = DynamoType(key[table.hash_key_attr]), None
    else:
        hash_value, range_value = DynamoType(key), None
    shadow = _shadow(table, current)
    item = shadow.get_item(hash_value, range_value)
    if item is None:
        if ast is not None:  # validate before creating anything, as moto does
            UpdateExpressionValidator(
                ast,
                expression_attribute_names=names,
                expression_attribute_values=values,
                item=Item(hash_value, range_value, attrs={}),
                table=shadow,
            ).validate()
        data: dict[str, Any] = {table.hash_key_attr: {hash_value.type: hash_value.value}}
        if range_value:
            data[table.range_key_attr] = {range_value.type: range_value.value}  # type: ignore[index]
        item = shadow.put_item(data, overwrite=True)
    if ast is not None:
        validated = UpdateExpressionValidator(
            ast,
            expression_attribute_names=names,
            expression_attribute_values=values,
            item=item,
            table=shadow,
        ).validate()
        validated.normalize()
        try:
            UpdateExpressionExecutor(validated, item, names).execute()
        except ItemSizeTooLarge:
            raise ItemSizeToUpdateTooLarge() from None
    return item


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    """moto's ``TransactWriteItems`` without the table deep copy: check all, then apply."""
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    targets: set[tuple[str, str]] = set()
    errors: list[tuple[str, str, dict[str, Any]] | tuple[None, None, None]] = []
    plans: list[tuple[Table, Item | None, Any]] = []  # (table, current, new item | _DELETE)
    for entry in transact_items:
        original_item: dict[str, Any] | None = None
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(entry.items()))
            if op_type not in _OPERATIONS:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            item_id = (str(table_name), str(dict(sorted(key.items()))))
            if item_id in targets:
                raise MultipleTransactionsException()
            targets.add(item_id)

            table = self.get_table(table_name)
            current = self.get_item(table_name, key)
            condition = op.get("ConditionExpression")
            if condition is not None:
                names = op.get("ExpressionAttributeNames")
                condition_op = get_filter_expression(
                    condition, names, op.get("ExpressionAttributeValues")
                )
                if not condition_op.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)

            if op_type == "Put":
                plans.append((table, current, _shadow(table, None).put_item(attrs, overwrite=True)))
            elif op_type == "Delete":
                plans.append((table, current, _DELETE))
            elif op_type == "Update":
                plans.append((table, current, _updated_item(table, key, current, op)))
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            raise  # nothing was written: no rollback needed
        except ConditionalCheckFailed as exc:
            errors.append(("ConditionalCheckFailed", str(exc.message), original_item))  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - moto reports any other failure as a reason
            errors.append((type(exc).__name__, str(exc), original_item))  # type: ignore[arg-type]

    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    for table, current, new in plans:
        if new is _DELETE:
            if current is not None:
                table.delete_item(current.hash_key, current.range_key)
            continue
        if table.range_key_attr is not None:
            table.items[new.hash_key][new.range_key] = new
        else:
            table.items[new.hash_key] = new
        if table.stream_shard is not None:
            table.stream_shard.add(current, new)


def delete_object(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kw: Any) -> Any:
    """moto's ``delete_object``, which forgets a deleted key's tags (moto keeps them by ARN
    forever: a long session's every expired or purged batch object) and closes its buffer."""
    bucket = self.buckets.get(bucket_name)
    key = bucket.keys.get(key_name) if bucket is not None and not bucket.is_versioned else None
    result = _ORIGINAL_S3_DELETE(self, bucket_name, key_name, *args, **kw)
    if key is not None and getattr(key, "arn", None) and key_name not in bucket.keys:
        self.tagger.delete_all_tags_for_resource(key.arn)
        dispose = getattr(key, "dispose", None)
        if dispose is not None:
            dispose()
    return result


def apply() -> None:
    """Install :func:`transact_write_items` on moto's DynamoDB backend and
    :func:`delete_object` on its S3 backend (idempotent)."""
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
    S3Backend.delete_object = delete_object  # type: ignore[method-assign]


def revert() -> None:
    """Put moto's own implementation back (tests)."""
    DynamoDBBackend.transact_write_items = _ORIGINAL  # type: ignore[method-assign]
    S3Backend.delete_object = _ORIGINAL_S3_DELETE  # type: ignore[method-assign]


def is_applied() -> bool:
    """Whether the patch is installed in this process."""
    return DynamoDBBackend.transact_write_items is transact_write_items
