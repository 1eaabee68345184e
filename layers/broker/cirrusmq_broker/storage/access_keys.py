"""Access keys (AccessKeysTable) and the KMS cipher of their secrets.

A secret is stored only as KMS ciphertext, encrypted under the template's
``AccessKeySecretsKey`` with the encryption context ``{"access_key": <id>}`` (a ciphertext
copied onto another key's item does not decrypt).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ..errors import StorageUnavailable
from ..rules.permissions import Permissions
from .dynamo import error_code, from_item, to_item

log = logging.getLogger(__name__)

ACTIVE, DISABLED = "ACTIVE", "DISABLED"
_UNREADABLE = frozenset({"InvalidCiphertextException", "IncorrectKeyException"})
"""The ciphertext is not this key's: the key cannot sign (InvalidSignature)."""
_KMS_FAULTS = frozenset(
    {
        "AccessDeniedException",
        "DisabledException",
        "KMSInvalidStateException",
        "NotFoundException",
        "KeyUnavailableException",
        "DependencyTimeoutException",
        "KMSInternalException",
    }
)
"""KMS cannot decrypt now (a fault or a misconfiguration, not the caller's): 503."""


@dataclass(frozen=True)
class AccessKeyRecord:
    """One access key as stored (the secret only as ciphertext)."""

    access_key: str
    secret_ciphertext: bytes
    permissions: Permissions
    status: str
    description: str
    created_timestamp: int


class SecretCipher:
    """Encrypts (admin function) and decrypts (every API function) access-key secrets."""

    def __init__(self, kms: Any, key_id: str) -> None:
        self._kms = kms
        self._key_id = key_id

    def encrypt(self, access_key: str, secret: str) -> bytes:
        if not self._key_id:
            raise RuntimeError("CIRRUSMQ_SECRETS_KEY_ID is not set: cannot encrypt secrets")
        return bytes(
            self._kms.encrypt(
                KeyId=self._key_id,
                Plaintext=secret.encode(),
                EncryptionContext={"access_key": access_key},
            )["CiphertextBlob"]
        )

    def decrypt(self, access_key: str, ciphertext: bytes) -> str | None:
        """The secret, or None when the ciphertext does not decrypt for this key id."""
        try:
            plain = self._kms.decrypt(
                CiphertextBlob=ciphertext, EncryptionContext={"access_key": access_key}
            )["Plaintext"]
        except ClientError as exc:
            if error_code(exc) in _KMS_FAULTS:
                log.error("KMS cannot decrypt access key secrets: %s", error_code(exc))
                raise StorageUnavailable("access keys cannot be read now; retry") from exc
            if error_code(exc) not in _UNREADABLE:
                raise
            log.warning("the secret of access key %s does not decrypt", access_key)
            return None
        return bytes(plain).decode()


class AccessKeyStore:
    """CRUD on AccessKeysTable."""

    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def put(self, record: AccessKeyRecord, *, replace: bool = False) -> bool:
        """Store ``record``; False if the id exists (unless ``replace``)."""
        request: dict[str, Any] = {"TableName": self._table, "Item": to_item(_values(record))}
        if not replace:
            request["ConditionExpression"] = "attribute_not_exists(access_key)"
        try:
            self._client.put_item(**request)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def get(self, access_key: str) -> AccessKeyRecord | None:
        item = self._client.get_item(
            TableName=self._table, Key=to_item({"access_key": access_key}), ConsistentRead=True
        ).get("Item")
        return _record(from_item(item)) if item else None

    def list(self) -> list[AccessKeyRecord]:
        pages = self._client.get_paginator("scan").paginate(TableName=self._table)
        records = [_record(from_item(item)) for page in pages for item in page.get("Items", [])]
        return sorted(records, key=lambda r: (r.created_timestamp, r.access_key))

    def set_status(self, access_key: str, status: str) -> AccessKeyRecord | None:
        """Set the status of an existing key; None if there is no such key."""
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=to_item({"access_key": access_key}),
                UpdateExpression="SET #s = :s",
                ConditionExpression="attribute_exists(access_key)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=to_item({":s": status}),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return None
            raise
        return _record(from_item(response["Attributes"]))

    def delete(self, access_key: str) -> bool:
        """Delete a key; False if there was none."""
        try:
            self._client.delete_item(
                TableName=self._table,
                Key=to_item({"access_key": access_key}),
                ConditionExpression="attribute_exists(access_key)",
            )
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True


def _values(record: AccessKeyRecord) -> dict[str, Any]:
    return {
        "access_key": record.access_key,
        "secret_ciphertext": record.secret_ciphertext,
        "permissions": json.dumps(record.permissions.to_json(), separators=(",", ":")),
        "status": record.status,
        "description": record.description,
        "created_timestamp": record.created_timestamp,
    }


def _record(values: dict[str, Any]) -> AccessKeyRecord:
    ciphertext = values.get("secret_ciphertext", b"")
    return AccessKeyRecord(
        access_key=values["access_key"],
        secret_ciphertext=bytes(getattr(ciphertext, "value", ciphertext)),
        permissions=Permissions.from_json(json.loads(values.get("permissions") or "{}")),
        status=values.get("status", DISABLED),
        description=values.get("description", ""),
        created_timestamp=int(values.get("created_timestamp", 0)),
    )
