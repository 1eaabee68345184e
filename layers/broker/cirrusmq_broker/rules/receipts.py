"""Receipt handles: what a consumer gets per delivered message and hands back to ack.

A handle names the group, topic, queue, offset and the lease the message was delivered
under (and whether its topic was traced then: an ack of it is traced without reading the
topic), and is signed with HMAC-SHA256 so a consumer cannot forge one. Staleness (the lease
was replaced by a redelivery) is decided against the group state, not here.

A signer remembers the handles it made or verified last (``VERIFIED_HANDLES``): the same
text is decoded again without another HMAC (an ack after the receive that made its handle,
a trace of the handles an ack settled), as it can only decode to the same handle.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import threading
from dataclasses import dataclass

from ..errors import InvalidReceiptHandle

_SIGNATURE_BYTES = 16
_JSON = json.JSONEncoder(separators=(",", ":"))
VERIFIED_HANDLES = 4096
"""How many handle texts a signer remembers as verified (oldest forgotten first)."""


@dataclass(frozen=True)
class ReceiptHandle:
    """The decoded content of a receipt handle."""

    group: str
    topic: str
    queue: int
    offset: int
    lease_id: str
    delivery_attempt: int
    invisible_until: int
    traced: bool = False
    """The message's topic had message trace on when it was delivered."""


class ReceiptSigner:
    """Encodes and verifies receipt handles with one secret."""

    def __init__(self, secret: str) -> None:
        if len(secret) < 16:
            raise RuntimeError("the receipt signing secret must have at least 16 characters")
        self._key = secret.encode()
        self._verified: dict[str, ReceiptHandle] = {}
        self._lock = threading.Lock()

    def encode(self, handle: ReceiptHandle) -> str:
        fields: list = [
            handle.group,
            handle.topic,
            handle.queue,
            handle.offset,
            handle.lease_id,
            handle.delivery_attempt,
            handle.invisible_until,
        ]
        if handle.traced:  # untraced handles keep their original form
            fields.append(1)
        payload = _JSON.encode(fields).encode()
        text = f"{_b64(payload)}.{_b64(self._sign(payload))}"
        self._remember(text, handle)
        return text

    def decode(self, text: str) -> ReceiptHandle:
        """Verify and decode; raises InvalidReceiptHandle for anything forged or corrupt."""
        known = self._verified.get(text) if isinstance(text, str) else None
        if known is not None:
            return known
        handle = self._verify(text)
        self._remember(text, handle)
        return handle

    def _verify(self, text: str) -> ReceiptHandle:
        try:
            payload_text, signature_text = text.split(".")
            payload = _unb64(payload_text)
            signature = _unb64(signature_text)
        except (ValueError, TypeError) as exc:
            raise InvalidReceiptHandle("malformed receipt handle") from exc
        if not hmac.compare_digest(signature, self._sign(payload)):
            raise InvalidReceiptHandle("receipt handle signature does not match")
        group, topic, queue, offset, lease_id, attempt, invisible_until, *rest = json.loads(payload)
        return ReceiptHandle(
            group, topic, queue, offset, lease_id, attempt, invisible_until, bool(rest and rest[0])
        )

    def mark_traced(self, text: str) -> str:
        """The handle ``text`` (one this signer made) marked as one of a traced topic."""
        return self.encode(dataclasses.replace(self.decode(text), traced=True))

    def _remember(self, text: str, handle: ReceiptHandle) -> None:
        with self._lock:
            if len(self._verified) >= VERIFIED_HANDLES:
                del self._verified[next(iter(self._verified))]
            self._verified[text] = handle

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_SIGNATURE_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
