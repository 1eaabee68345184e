"""Seen request nonces (NoncesTable): one conditional put per signed request."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from .dynamo import error_code, to_item


class NonceStore:
    """Remembers ``<access_key>#<nonce>`` until ``expires_at`` (TTL, seconds)."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def remember(self, access_key: str, nonce: str, *, now_s: int, expires_at: int) -> bool:
        """Record the nonce; False if it was seen before and has not expired yet (an
        expired item that TTL has not deleted yet does not count)."""
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item({"nonce_key": f"{access_key}#{nonce}", "expires_at": expires_at}),
                ConditionExpression="attribute_not_exists(nonce_key) OR expires_at < :now",
                ExpressionAttributeValues=to_item({":now": now_s}),
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True
