"""Run leases of scheduled functions that loop through their minute (one item each).

A scheduled function that has work due within its run loops until the run ends, and says
so on its lease item: ``run_until`` (a run loops until then) and ``asked_at`` (a send asked
for a run then, and no run has started since). A send whose work falls due before the next
scheduled run reads the lease and asks for a run only when no looping run covers it
(services/delays/wake.py): so the runs cost nothing at rest and start once per need.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from botocore.exceptions import ClientError

from .dynamo import error_code, from_item, to_item


class RunLease(NamedTuple):
    """The runs as the lease item records them (epoch ms, 0: none)."""

    run_until: int = 0
    asked_at: int = 0


class RunLeaseStore:
    """The lease item ``key`` of ``table`` (an item that may hold other attributes too)."""

    def __init__(self, client: Any, table: str, key: dict[str, str]) -> None:
        self._client = client
        self._table = table
        self._key = to_item(key)

    def run_lease(self) -> RunLease:
        """The run lease as the item holds it (one consistent read)."""
        item = self._client.get_item(
            TableName=self._table,
            Key=self._key,
            ConsistentRead=True,
            ProjectionExpression="run_until, asked_at",
        ).get("Item")
        values = from_item(item) if item else {}
        return RunLease(int(values.get("run_until", 0)), int(values.get("asked_at", 0)))

    def claim_run(self, until: int, unless_covering: int) -> bool:
        """Record that a run loops until ``until``, unless a run already loops until at
        least ``unless_covering`` (False then). Never shortens a lease."""
        return self._conditional_update(
            "SET run_until = :until",
            "attribute_not_exists(run_until) OR run_until < :need",
            {":until": until, ":need": min(unless_covering, until)},
        )

    def ask_run(self, now: int, *, pending_since: int) -> bool:
        """Record that a send asks for a run at ``now``, unless another asked at or after
        ``pending_since`` and no run started since (False then: that run is coming)."""
        return self._conditional_update(
            "SET asked_at = :now",
            "attribute_not_exists(asked_at) OR asked_at < :since",
            {":now": now, ":since": pending_since},
        )

    def run_started(self, now: int) -> None:
        """A run looks from ``now`` on: the asks made until then are answered."""
        self._conditional_update("REMOVE asked_at", "asked_at <= :now", {":now": now})

    def withdraw_ask(self, asked_at: int) -> None:
        """The run asked for at ``asked_at`` could not be started: the next send asks."""
        self._conditional_update("REMOVE asked_at", "asked_at = :at", {":at": asked_at})

    def _conditional_update(self, update: str, condition: str, values: dict[str, Any]) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=self._key,
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeValues=to_item(values),
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True
