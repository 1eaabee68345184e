"""Notification connections (ConnectionsTable): who is connected and who waits on what.

Three kinds of items, all with a TTL (``expires_at``, seconds):

- ``pk = "c#<connection id>"``, ``sk = "c"``: an open WebSocket and the access key that
  signed its upgrade request (read back by every wait message: the permission check), and
  ``waits``: digests of the (group, topic) pairs it registered (its cap);
- ``pk = "k#<access key>"``, ``sk = "w#<window>"``: how many (group, topic) pairs the key's
  connections registered for the first time in that window (the key's cap);
- ``pk = "t#<topic>"``, ``sk = "<connection id>#<group>"``: the connection waits for data on
  that topic for that group; ``registration`` names the wait message that wrote it,
  ``access_key`` the connection's key (the notifier checks it is still active). The
  notifier reads a topic's waiters with one (consistent) Query and, once its "look now" is
  posted, deletes each waiter it told — only if it is still that registration
  (:meth:`ConnectionStore.release_waiters`): a notified connection no longer waits until it
  says so again (it goes idle again), so a busy topic costs no notifications, and a wait
  sent again while the post was in flight stays.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import (
    BATCH_WRITE_LIMIT,
    batch_write,
    cancellation_codes,
    error_code,
    from_item,
    to_item,
)

__all__ = ["Connection", "ConnectionStore", "Waiter", "wait_digest"]


@dataclass(frozen=True)
class Waiter:
    """One (connection, group) waiting on a topic."""

    connection_id: str
    group: str
    topic: str
    registration: str | None = None
    """The wait message that wrote it (None: an item written without one)."""
    access_key: str | None = None
    """The key of the connection (None: an item written without it)."""


@dataclass(frozen=True)
class Connection:
    """An open connection as its item says."""

    connection_id: str
    access_key: str
    waits: frozenset[str]
    """Digests (:func:`wait_digest`) of the (group, topic) pairs it registered."""


def wait_digest(group: str, topic: str) -> str:
    """A short fixed-size name of a (group, topic) pair (names run to 127 characters each:
    a connection's item stays small at its cap)."""
    return hashlib.sha256(f"{group}\0{topic}".encode()).hexdigest()[:16]


still_that_registration = "registration = :reg"
open_with_room = "attribute_exists(pk) AND (attribute_not_exists(waits) OR size(waits) <= :room)"
"""A connection takes new pairs only while it is open and has room for all of them."""
key_window_with_room = "attribute_not_exists(registered) OR registered <= :room"
"""A key's window takes new pairs only while it has room for all of them."""
"""A told waiter is deleted only if no wait message has written it since it was read."""


def _window(window: int) -> str:
    return f"w#{window:012d}"


def _connection_key(connection_id: str) -> dict[str, Any]:
    return {"pk": f"c#{connection_id}", "sk": "c"}


def _waiter_key(connection_id: str, group: str, topic: str) -> dict[str, Any]:
    return {"pk": f"t#{topic}", "sk": f"{connection_id}#{group}"}


class ConnectionStore:
    """Reads and writes the connections table."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self.table = table

    def put_connection(self, connection_id: str, access_key: str, *, expires_at: int) -> None:
        item = {**_connection_key(connection_id), "access_key": access_key}
        item["expires_at"] = expires_at
        self._client.put_item(TableName=self.table, Item=to_item(item))

    def access_key_of(self, connection_id: str) -> str | None:
        """The access key that opened the connection, or None (unknown or gone)."""
        connection = self.connection(connection_id)
        return connection.access_key if connection else None

    def connection(self, connection_id: str) -> Connection | None:
        """The connection's item, or None (unknown or gone)."""
        item = self._client.get_item(
            TableName=self.table, Key=to_item(_connection_key(connection_id))
        ).get("Item")
        if not item:
            return None
        values = from_item(item)
        waits = frozenset(str(w) for w in values.get("waits") or ())
        return Connection(connection_id, str(values["access_key"]), waits)

    def key_waits(self, access_key: str, windows: tuple[int, int]) -> dict[int, int]:
        """Window → pairs the key's connections registered in it, for ``windows`` (from,
        to; one Query)."""
        first, last = windows
        page = self._client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
            ExpressionAttributeValues=to_item(
                {":pk": f"k#{access_key}", ":first": _window(first), ":last": _window(last)}
            ),
            ConsistentRead=True,
        )
        counts: dict[int, int] = {}
        for item in page.get("Items", []):
            values = from_item(item)
            counts[int(str(values["sk"])[2:])] = int(values.get("registered", 0))
        return counts

    def claim_waits(
        self,
        connection: Connection,
        digests: list[str],
        *,
        connection_room: int,
        window: int,
        key_room: int,
        window_expires_at: int,
    ) -> str | None:
        """Add ``digests`` (pairs new to the connection) to the connection's set and to the
        key's count in ``window``, both or neither (one transaction). None when done, else
        what had no room: ``"connection"`` (full, or closed meanwhile) or ``"key"``."""
        add_to_connection = {
            "Update": {
                "TableName": self.table,
                "Key": to_item(_connection_key(connection.connection_id)),
                "UpdateExpression": "ADD waits :new",
                "ConditionExpression": open_with_room,
                "ExpressionAttributeValues": {
                    ":new": {"SS": list(digests)},
                    ":room": {"N": str(connection_room)},
                },
            }
        }
        add_to_key = {
            "Update": {
                "TableName": self.table,
                "Key": to_item({"pk": f"k#{connection.access_key}", "sk": _window(window)}),
                "UpdateExpression": "ADD registered :n SET expires_at = :expires",
                "ConditionExpression": key_window_with_room,
                "ExpressionAttributeValues": to_item(
                    {":n": len(digests), ":room": key_room, ":expires": window_expires_at}
                ),
            }
        }
        try:
            self._client.transact_write_items(TransactItems=[add_to_connection, add_to_key])
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            codes = cancellation_codes(exc)
            if codes[:1] == ["ConditionalCheckFailed"]:
                return "connection"
            if codes[1:2] == ["ConditionalCheckFailed"]:
                return "key"
            raise
        return None

    def delete_connection(self, connection_id: str) -> None:
        """Forget the connection (its waiters are removed when a post finds it gone, or by
        their TTL)."""
        self._client.delete_item(TableName=self.table, Key=to_item(_connection_key(connection_id)))

    def put_waiters(
        self,
        connection_id: str,
        group: str,
        topics: Iterable[str],
        *,
        access_key: str,
        expires_at: int,
    ) -> None:
        """Register (or refresh) the connection as waiting on each topic for ``group``."""
        registration = secrets.token_hex(8)
        requests = [
            {
                "PutRequest": {
                    "Item": to_item(
                        {
                            **_waiter_key(connection_id, group, topic),
                            "connection_id": connection_id,
                            "group": group,
                            "registration": registration,
                            "access_key": access_key,
                            "expires_at": expires_at,
                        }
                    )
                }
            }
            for topic in topics
        ]
        self._write(requests)

    def waiters(self, topic: str, *, now_s: int) -> list[Waiter]:
        """The connections waiting on ``topic`` (one Query, paged; expired ones left out).
        The read is consistent: a wait confirmed before an append is found by its notifier."""
        found: list[Waiter] = []
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "ConsistentRead": True,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": to_item({":pk": f"t#{topic}"}),
        }
        while True:
            page = self._client.query(**kwargs)
            for item in page.get("Items", []):
                values = from_item(item)
                if int(values.get("expires_at", 0)) > now_s:
                    found.append(
                        Waiter(
                            values["connection_id"],
                            values["group"],
                            topic,
                            values.get("registration"),
                            values.get("access_key"),
                        )
                    )
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def release_waiters(self, waiters: Iterable[Waiter]) -> None:
        """Delete each told waiter if it is still the registration that was read (one
        conditional DeleteItem each: the notifier's guard against a wait sent again while
        its post was in flight, which stays)."""
        for waiter in waiters:
            if waiter.registration is None:
                condition, values = "attribute_not_exists(registration)", None
            else:
                condition, values = still_that_registration, {":reg": waiter.registration}
            kwargs: dict[str, Any] = {
                "TableName": self.table,
                "Key": to_item(_waiter_key(waiter.connection_id, waiter.group, waiter.topic)),
                "ConditionExpression": condition,
            }
            if values:
                kwargs["ExpressionAttributeValues"] = to_item(values)
            try:
                self._client.delete_item(**kwargs)
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise  # else: registered again (or gone) meanwhile: it stays as it is

    def delete_waiters(self, waiters: Iterable[Waiter]) -> None:
        """Delete these waiters whatever registered them (a connection that is gone)."""
        requests = [
            {"DeleteRequest": {"Key": to_item(_waiter_key(w.connection_id, w.group, w.topic))}}
            for w in waiters
        ]
        self._write(requests)

    def _write(self, requests: list[dict[str, Any]]) -> None:
        for start in range(0, len(requests), BATCH_WRITE_LIMIT):
            batch_write(self._client, self.table, requests[start : start + BATCH_WRITE_LIMIT])
