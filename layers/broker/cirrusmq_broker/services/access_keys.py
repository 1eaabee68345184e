"""Access keys management (admin): create, list, enable/disable, delete."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import InvalidRequest, KeyInUse, KeyNotFound
from ..rules.permissions import Permissions
from ..storage.access_keys import ACTIVE, DISABLED, AccessKeyRecord, AccessKeyStore, SecretCipher

KEY_PREFIX = "CMQ"
MAX_DESCRIPTION_CHARS = 256


@dataclass(frozen=True)
class AccessKey:
    """An access key as shown to admins (never its secret)."""

    access_key: str
    description: str
    permissions: Permissions
    status: str
    created_timestamp: int


def new_access_key() -> str:
    """``CMQ`` + 17 upper-case base32 characters (85 random bits)."""
    return KEY_PREFIX + base64.b32encode(secrets.token_bytes(11)).decode()[:17]


def new_secret() -> str:
    """40 characters of urlsafe base64 (240 random bits)."""
    return secrets.token_urlsafe(30)


class AccessKeysService:
    def __init__(
        self,
        *,
        store: AccessKeyStore,
        cipher: SecretCipher,
        clock: Callable[[], int],
        on_change: Callable[[str], None] = lambda _: None,
    ) -> None:
        self._store = store
        self._cipher = cipher
        self._clock = clock
        self._on_change = on_change
        """Called with a key id whose status changed (drops this process's cached copy)."""

    def create(self, permissions: Permissions, description: str = "") -> tuple[AccessKey, str]:
        """A new active key and its secret (the only time the secret is shown)."""
        _check_description(description)
        for _ in range(3):
            access_key, secret = new_access_key(), new_secret()
            record = self._record(access_key, secret, permissions, description)
            if self._store.put(record):
                return _public(record), secret
        raise RuntimeError("could not pick a fresh access key id")

    def put(
        self, access_key: str, secret: str, permissions: Permissions, description: str = ""
    ) -> AccessKey:
        """Store a key with a given id and secret, replacing any (the local stack's
        bootstrap key)."""
        record = self._record(access_key, secret, permissions, description)
        self._store.put(record, replace=True)
        self._on_change(access_key)
        return _public(record)

    def list(self) -> list[AccessKey]:
        return [_public(r) for r in self._store.list()]

    def set_enabled(self, access_key: str, enabled: bool, *, caller: str) -> AccessKey:
        if access_key == caller:  # a disabled key still cached elsewhere must not revive itself
            raise KeyInUse("an access key cannot disable or enable itself; use another admin key")
        record = self._store.set_status(access_key, ACTIVE if enabled else DISABLED)
        self._on_change(access_key)
        if record is None:
            raise KeyNotFound(f"no access key {access_key}")
        return _public(record)

    def delete(self, access_key: str, *, caller: str) -> None:
        if access_key == caller:
            raise KeyInUse("an access key cannot delete itself; use another admin key")
        deleted = self._store.delete(access_key)
        self._on_change(access_key)
        if not deleted:
            raise KeyNotFound(f"no access key {access_key}")

    def _record(
        self, access_key: str, secret: str, permissions: Permissions, description: str
    ) -> AccessKeyRecord:
        return AccessKeyRecord(
            access_key=access_key,
            secret_ciphertext=self._cipher.encrypt(access_key, secret),
            permissions=permissions,
            status=ACTIVE,
            description=description,
            created_timestamp=self._clock(),
        )


def _check_description(description: str) -> None:
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidRequest(f"description is longer than {MAX_DESCRIPTION_CHARS} characters")
    try:
        description.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRequest("description is not valid Unicode text") from exc


def _public(record: AccessKeyRecord) -> AccessKey:
    return AccessKey(
        access_key=record.access_key,
        description=record.description,
        permissions=record.permissions,
        status=record.status,
        created_timestamp=record.created_timestamp,
    )
