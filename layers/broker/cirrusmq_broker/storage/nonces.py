"""Seen request nonces (NoncesTable): one conditional put per signed request."""

from __future__ import annotations

import uuid
from typing import Any

from botocore.exceptions import ClientError

from .dynamo import error_code, from_item, to_item


class NonceStore:
    """Remembers ``<access_key>#<nonce>`` until ``expires_at`` (TTL, seconds)."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def remember(self, access_key: str, nonce: str, *, now_s: int, expires_at: int) -> bool:
        """Record the nonce; False if it was seen before and has not expired yet (an
        expired item that TTL has not deleted yet does not count).

        The item carries a token of this call: when botocore resends the put after its
        answer was lost, the item the resend finds is this call's own (not a replay)."""
        token = uuid.uuid4().hex
        item = {"nonce_key": f"{access_key}#{nonce}", "expires_at": expires_at, "token": token}
        try:
            self._client.put_item(
                TableName=self._table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(nonce_key) OR expires_at < :now",
                ExpressionAttributeValues=to_item({":now": now_s}),
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return from_item(exc.response.get("Item") or {}).get("token") == token
            raise
        return True
