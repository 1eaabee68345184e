"""Transactions (TransactionsTable): transaction items, producer registrations, check inboxes.

One partition per producer group (``producer_group``), sort key ``item_key``:

- ``txn#<transaction id>``: a transaction (state, target topic, its half parts as
  ``part_<n>`` JSON attributes, check timings and counters). While it is not ended it
  carries ``due_shard`` + ``next_check_at`` (the sparse index ``open_by_due`` the checker
  reads: no scan, only undecided transactions are in it) and ``open_group`` + ``created_at``
  (the sparse index ``open_by_group`` operators list); ending it removes both and sets a TTL.
- ``producer#<transactional id>``: a registration and its epoch (fencing).
- ``inbox``: the ids of transactions with a check request pending for the group; a
  producer's long poll reads this one item (no query while idle).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from botocore.exceptions import ClientError

from ..rules.transaction_state import (
    CheckTimings,
    HalfObject,
    HalfPart,
    Transaction,
    TxnState,
    part_record_size,
)
from .dynamo import KeysToRead, batch_get, cancellation_codes, error_code, from_item, to_item
from .run_leases import RunLeaseStore

CONDITION_FAILED = "ConditionalCheckFailed"
INBOX = "inbox"
DUE_INDEX = "open_by_due"
GROUP_INDEX = "open_by_group"


class FenceFailed(Exception):
    """The caller's epoch is not the registration's current one (or it never registered)."""


class StateChanged(Exception):
    """The transaction item did not meet the update's condition."""


CHECKER_RUNS_GROUP = "#checker"
"""The partition of the back-checker's run lease (no producer group has a ``#``)."""


def txn_key(transaction_id: str) -> str:
    return f"txn#{transaction_id}"


def producer_key(transactional_id: str) -> str:
    return f"producer#{transactional_id}"


class TransactionStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table

    @property
    def runs(self) -> RunLeaseStore:
        """The back-checker's run lease (:mod:`..run_leases`)."""
        return RunLeaseStore(
            self._client, self.table, {"producer_group": CHECKER_RUNS_GROUP, "item_key": "run"}
        )

    def _key(self, producer_group: str, item_key: str) -> dict[str, Any]:
        return to_item({"producer_group": producer_group, "item_key": item_key})

    # ------------------------------------------------------------ registrations
    def register(
        self,
        producer_group: str,
        transactional_id: str,
        now: int,
        *,
        expires_at: int,
        access_key: str | None = None,
        take_over: bool = False,
    ) -> int:
        """A new epoch for the transactional id (one atomic increment); the registration
        expires (TTL) unless its producer keeps polling (:meth:`touch`). It records
        ``access_key``: another key may register it again only with ``take_over`` (an
        admin); raises FenceFailed otherwise."""
        values: dict[str, Any] = {":one": 1, ":now": now, ":exp": expires_at}
        request: dict[str, Any] = {}
        expression = "ADD epoch :one SET registered_at = :now, expires_at = :exp"
        if access_key is not None:
            values[":ak"] = access_key
            expression += ", access_key = :ak"
            if not take_over:
                request["ConditionExpression"] = (
                    "attribute_not_exists(access_key) OR access_key = :ak"
                )
        try:
            response = self._client.update_item(
                TableName=self.table,
                Key=self._key(producer_group, producer_key(transactional_id)),
                UpdateExpression=expression,
                ExpressionAttributeValues=to_item(values),
                ReturnValues="UPDATED_NEW",
                **request,
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise FenceFailed() from exc
            raise
        return int(from_item(response["Attributes"])["epoch"])

    def register_first(
        self,
        producer_group: str,
        transactional_id: str,
        now: int,
        *,
        expires_at: int,
        access_key: str | None = None,
    ) -> bool:
        """Register the transactional id at epoch 1 unless it is registered already (one
        conditional put; False then: the registration is left as it is)."""
        not_registered = "attribute_not_exists(item_key)"
        try:
            self._client.put_item(
                TableName=self.table,
                Item={
                    **self._key(producer_group, producer_key(transactional_id)),
                    **to_item(
                        {
                            "epoch": 1,
                            "registered_at": now,
                            "expires_at": expires_at,
                            "access_key": access_key,
                        }
                    ),
                },
                ConditionExpression=not_registered,
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def registration(self, producer_group: str, transactional_id: str) -> tuple[int, int] | None:
        """(epoch, expires_at) of the registration, None if there is none."""
        found = self.registration_of(producer_group, transactional_id)
        return (found[0], found[1]) if found else None

    def registration_of(
        self, producer_group: str, transactional_id: str
    ) -> tuple[int, int, str | None] | None:
        """(epoch, expires_at, access key that registered) or None."""
        item = self._client.get_item(
            TableName=self.table,
            Key=self._key(producer_group, producer_key(transactional_id)),
            ConsistentRead=True,
        ).get("Item")
        if not item:
            return None
        values = from_item(item)
        return int(values["epoch"]), int(values.get("expires_at", 0)), values.get("access_key")

    def epoch(self, producer_group: str, transactional_id: str) -> int | None:
        found = self.registration(producer_group, transactional_id)
        return found[0] if found else None

    def touch(
        self, producer_group: str, transactional_id: str, epoch: int, expires_at: int
    ) -> None:
        """Keep a live producer's registration (only while it is still at ``epoch``)."""
        try:
            self._client.update_item(
                TableName=self.table,
                Key=self._key(producer_group, producer_key(transactional_id)),
                UpdateExpression="SET expires_at = :exp",
                ConditionExpression="epoch = :epoch",
                ExpressionAttributeValues=to_item({":exp": expires_at, ":epoch": epoch}),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def fence_request(
        self, producer_group: str, transactional_id: str, epoch: int, access_key: str | None = None
    ) -> dict:
        """A transaction item: the registration is still at ``epoch`` (and, with
        ``access_key``, was made by that key)."""
        condition, values = "epoch = :epoch", {":epoch": epoch}
        if access_key is not None:
            condition += " AND (attribute_not_exists(access_key) OR access_key = :ak)"
            values[":ak"] = access_key  # type: ignore[assignment]
        return {
            "ConditionCheck": {
                "TableName": self.table,
                "Key": self._key(producer_group, producer_key(transactional_id)),
                "ConditionExpression": condition,
                "ExpressionAttributeValues": to_item(values),
            }
        }

    # ------------------------------------------------------------- transactions
    def add_part(
        self,
        *,
        producer_group: str,
        transaction_id: str,
        transactional_id: str,
        epoch: int,
        topic: str,
        timings: CheckTimings,
        shard: str,
        part: HalfPart,
        now: int,
        access_key: str | None = None,
        max_recorded_bytes: int | None = None,
    ) -> None:
        """Record a send's half part, creating the transaction on its first send.

        Raises FenceFailed or StateChanged (ended, another topic or producer, part taken,
        or the item would record more than ``max_recorded_bytes`` of parts).
        """
        part_json = encode_part(part)
        size = part_record_size(part_json)
        values = {
            ":open": TxnState.OPEN.value,
            ":topic": topic,
            ":tid": transactional_id,
            ":epoch": epoch,
            ":txid": transaction_id,
            ":now": now,
            ":due": now + timings.immunity_seconds * 1000,
            ":shard": shard,
            ":pg": producer_group,
            ":imm": timings.immunity_seconds,
            ":int": timings.interval_seconds,
            ":max": timings.max_checks,
            ":zero": 0,
            ":part": part_json,
            ":count": len(part.message_ids),
            ":size": size,
        }
        size_condition = ""
        if max_recorded_bytes is not None:
            values[":room"] = max_recorded_bytes - size
            size_condition = " AND (attribute_not_exists(parts_bytes) OR parts_bytes <= :room)"
        update = {
            "TableName": self.table,
            "Key": self._key(producer_group, txn_key(transaction_id)),
            "UpdateExpression": (
                "SET #part = :part, #state = if_not_exists(#state, :open), "
                "topic = if_not_exists(topic, :topic), "
                "transactional_id = if_not_exists(transactional_id, :tid), "
                "epoch = if_not_exists(epoch, :epoch), "
                "transaction_id = if_not_exists(transaction_id, :txid), "
                "created_at = if_not_exists(created_at, :now), "
                "next_check_at = if_not_exists(next_check_at, :due), "
                "due_shard = if_not_exists(due_shard, :shard), "
                "open_group = if_not_exists(open_group, :pg), "
                "immunity_s = if_not_exists(immunity_s, :imm), "
                "interval_s = if_not_exists(interval_s, :int), "
                "max_checks = if_not_exists(max_checks, :max), "
                "checks = if_not_exists(checks, :zero) "
                "ADD message_count :count, parts_bytes :size"
            ),
            "ConditionExpression": (
                "attribute_not_exists(#part) AND (attribute_not_exists(#state) OR "
                "(#state = :open AND topic = :topic AND transactional_id = :tid "
                "AND epoch = :epoch))" + size_condition
            ),
            "ExpressionAttributeNames": {"#part": f"part_{part.part}", "#state": "state"},
            "ExpressionAttributeValues": to_item(values),
        }
        self._write(update, fence=(producer_group, transactional_id, epoch, access_key))

    def get(
        self, producer_group: str, transaction_id: str, *, consistent: bool = True
    ) -> Transaction | None:
        item = self._client.get_item(
            TableName=self.table,
            Key=self._key(producer_group, txn_key(transaction_id)),
            ConsistentRead=consistent,
        ).get("Item")
        return _transaction(from_item(item)) if item else None

    def get_many(self, producer_group: str, transaction_ids: list[str]) -> list[Transaction]:
        keys = [{"producer_group": producer_group, "item_key": txn_key(t)} for t in transaction_ids]
        found = batch_get(self._client, [KeysToRead(self.table, keys, consistent=True)])
        return [_transaction(values) for values in found[self.table]]

    def transition(
        self,
        producer_group: str,
        transaction_id: str,
        *,
        expect: tuple[TxnState, ...],
        to: TxnState,
        now: int,
        values: dict[str, Any] | None = None,
        fence: tuple[str, int] | None = None,
        expires_at: int | None = None,
        access_key: str | None = None,
        message_count: int | None = None,
    ) -> None:
        """Move the transaction from one of ``expect`` to ``to`` (ending it removes it from
        both sparse indexes). ``fence``: (transactional id, epoch) that must be current.

        ``message_count``: the count of the parts the mover read. A part send adds its
        messages to ``message_count`` in the write that records the part, parts are never
        removed and each holds at least one message: the move is refused (StateChanged)
        if any part was recorded after that read, so a commit or rollback acts on exactly
        the parts it moved."""
        sets = {"#state": ":to", **{k: f":v_{k}" for k in values or {}}}
        attrs: dict[str, Any] = {":to": to.value}
        attrs.update({f":v_{k}": v for k, v in (values or {}).items()})
        names = {"#state": "state"}
        expression = "SET " + ", ".join(f"{k} = {v}" for k, v in sets.items())
        if to in (TxnState.COMMITTED, TxnState.ROLLED_BACK):
            expression += ", expires_at = :expires, ended_at = :now"
            attrs[":expires"] = expires_at
            attrs[":now"] = now
            expression += " REMOVE due_shard, open_group, next_check_at, claim_until"
        expected = [f":e{i}" for i in range(len(expect))]
        attrs.update({f":e{i}": s.value for i, s in enumerate(expect)})
        condition = f"#state IN ({', '.join(expected)})"
        if message_count is not None:
            condition += " AND message_count = :parts_read"
            attrs[":parts_read"] = message_count
        update = {
            "TableName": self.table,
            "Key": self._key(producer_group, txn_key(transaction_id)),
            "UpdateExpression": expression,
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_item(attrs),
        }
        self._write(update, fence=(producer_group, *fence, access_key) if fence else None)

    def ask(self, txn: Transaction, now: int) -> bool:
        """Count a check request and set the next check time; False if it changed since."""
        try:
            self._client.update_item(
                TableName=self.table,
                Key=self._key(txn.producer_group, txn_key(txn.transaction_id)),
                UpdateExpression="SET checks = :checks, next_check_at = :next, "
                "last_check_at = :now REMOVE claim_until, check_failures",
                ConditionExpression="#state = :open AND checks = :was",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=to_item(
                    {
                        ":checks": txn.checks + 1,
                        ":was": txn.checks,
                        ":next": now + txn.timings.interval_seconds * 1000,
                        ":now": now,
                        ":open": TxnState.OPEN.value,
                    }
                ),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def claim(self, txn: Transaction, now: int, until: int, by: str | None = None) -> bool:
        """Hand the pending check to one producer (transactional id ``by``, recorded); False
        if another holds it or it ended."""
        try:
            self._client.update_item(
                TableName=self.table,
                Key=self._key(txn.producer_group, txn_key(txn.transaction_id)),
                UpdateExpression="SET claim_until = :until"
                + (", claimed_by = :by" if by else " REMOVE claimed_by"),
                ConditionExpression="#state = :open AND "
                "(attribute_not_exists(claim_until) OR claim_until < :now)",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=to_item(
                    {
                        ":until": until,
                        ":now": now,
                        ":open": TxnState.OPEN.value,
                        **({":by": by} if by else {}),
                    }
                ),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def release_claim(self, producer_group: str, transaction_id: str) -> None:
        self._client.update_item(
            TableName=self.table,
            Key=self._key(producer_group, txn_key(transaction_id)),
            UpdateExpression="REMOVE claim_until, claimed_by",
            ConditionExpression="attribute_exists(item_key)",
        )

    def any_undecided(self) -> bool:
        """Whether any transaction is undecided: one Scan of the sparse due index, which
        holds undecided transactions only (nothing to read when none is open)."""
        response = self._client.scan(
            TableName=self.table, IndexName=DUE_INDEX, Limit=1, Select="COUNT"
        )
        return bool(response.get("Count")) or "LastEvaluatedKey" in response

    def due(self, shard: str, until: int, *, limit: int = 100) -> list[Transaction]:
        """Undecided transactions of one shard whose next check is at or before ``until``."""
        response = self._client.query(
            TableName=self.table,
            IndexName=DUE_INDEX,
            KeyConditionExpression="due_shard = :shard AND next_check_at <= :until",
            ExpressionAttributeValues=to_item({":shard": shard, ":until": until}),
            Limit=limit,
        )
        return [_transaction(from_item(item)) for item in response.get("Items", [])]

    def open_of_group(self, producer_group: str, *, limit: int = 1000) -> list[Transaction]:
        """Not yet ended transactions of a producer group, oldest first."""
        found: list[Transaction] = []
        start: dict[str, Any] | None = None
        while len(found) < limit:
            more = {"ExclusiveStartKey": start} if start else {}
            response = self._client.query(
                TableName=self.table,
                IndexName=GROUP_INDEX,
                KeyConditionExpression="open_group = :pg",
                ExpressionAttributeValues=to_item({":pg": producer_group}),
                Limit=min(100, limit - len(found)),
                **more,
            )
            found.extend(_transaction(from_item(i)) for i in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        return found

    # --------------------------------------------------------------------- inbox
    def pending_checks(self, producer_group: str) -> set[str]:
        item = self._client.get_item(
            TableName=self.table, Key=self._key(producer_group, INBOX)
        ).get("Item")
        return set(from_item(item).get("pending", set())) if item else set()

    def add_pending(
        self, producer_group: str, transaction_ids: list[str], *, max_pending: int | None = None
    ) -> bool:
        """Publish check requests (idempotent: a set). False, and nothing added, when the
        inbox already holds ``max_pending`` ids (its producers are not answering)."""
        request: dict[str, Any] = {}
        values: dict[str, Any] = {":ids": {"SS": sorted(set(transaction_ids))}}
        if max_pending is not None:
            request["ConditionExpression"] = (
                "attribute_not_exists(pending) OR size(pending) <= :room"
            )
            values[":room"] = {"N": str(max_pending - len(set(transaction_ids)))}
        try:
            self._client.update_item(
                TableName=self.table,
                Key=self._key(producer_group, INBOX),
                UpdateExpression="ADD pending :ids",
                ExpressionAttributeValues=values,
                **request,
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def postpone(self, txn: Transaction, next_check_at: int, error: str) -> None:
        """A checker pass failed on ``txn``: count it, keep the error, check it again later
        (not in the next pass: a failing transaction neither spins nor hides others)."""
        try:
            self._client.update_item(
                TableName=self.table,
                Key=self._key(txn.producer_group, txn_key(txn.transaction_id)),
                UpdateExpression="SET next_check_at = :next, last_error = :error "
                "ADD check_failures :one",
                ConditionExpression="#state IN (:open, :committing)",
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=to_item(
                    {
                        ":next": next_check_at,
                        ":error": error[:1000],
                        ":one": 1,
                        ":open": TxnState.OPEN.value,
                        ":committing": TxnState.COMMITTING.value,
                    }
                ),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise

    def remove_pending(self, producer_group: str, transaction_ids: list[str]) -> None:
        self._client.update_item(
            TableName=self.table,
            Key=self._key(producer_group, INBOX),
            UpdateExpression="DELETE pending :ids",
            ExpressionAttributeValues={":ids": {"SS": sorted(set(transaction_ids))}},
        )

    # ------------------------------------------------------------------- helpers
    def _write(
        self, update: dict[str, Any], *, fence: tuple[str, str, int, str | None] | None
    ) -> None:
        if fence is None:
            try:
                self._client.update_item(**update)
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    raise StateChanged() from exc
                raise
            return
        items = [self.fence_request(*fence), {"Update": update}]
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            codes = cancellation_codes(exc)
            if codes and codes[0] == CONDITION_FAILED:
                raise FenceFailed() from exc
            if len(codes) > 1 and codes[1] == CONDITION_FAILED:
                raise StateChanged() from exc
            raise


def encode_part(part: HalfPart) -> str:
    """A half part as the transaction item records it (``part_<n>``: compact JSON). The
    one codec of the format: services measure a part with it before sending."""
    values = {
        "digest": part.digest,
        "objects": [asdict(o) for o in part.objects],
        "ids": list(part.message_ids),
        "queues": list(part.queues),
    }
    return json.dumps(values, separators=(",", ":"))


def decode_part(number: int, text: str) -> HalfPart:
    """The half part ``number`` from its recorded JSON (see :func:`encode_part`)."""
    values = json.loads(text)
    return HalfPart(
        part=number,
        digest=values["digest"],
        objects=tuple(HalfObject(**o) for o in values["objects"]),
        message_ids=tuple(values["ids"]),
        queues=tuple(values["queues"]),
    )


def _transaction(values: dict[str, Any]) -> Transaction:
    parts = tuple(
        sorted(
            (decode_part(int(k[5:]), v) for k, v in values.items() if k.startswith("part_")),
            key=lambda p: p.part,
        )
    )
    return Transaction(
        producer_group=values["producer_group"],
        transaction_id=values["transaction_id"],
        transactional_id=values["transactional_id"],
        epoch=int(values["epoch"]),
        topic=values["topic"],
        state=TxnState(values["state"]),
        created_at=int(values["created_at"]),
        timings=CheckTimings(
            int(values["immunity_s"]), int(values["interval_s"]), int(values["max_checks"])
        ),
        parts=parts,
        checks=int(values.get("checks", 0)),
        next_check_at=values.get("next_check_at"),
        commit_started_at=values.get("commit_started_at"),
        ended_at=values.get("ended_at"),
        end_reason=values.get("end_reason"),
        ended_by=values.get("ended_by"),
        claim_until=int(values.get("claim_until", 0)),
        claimed_by=values.get("claimed_by"),
        check_failures=int(values.get("check_failures", 0)),
        last_error=values.get("last_error"),
    )
