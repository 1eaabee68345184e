"""Which dead letters redrives sent back (ProducersTable, one item per DLQ batch).

Item ``~redrive-claims.<group>#<DLQ base offset>``: ``offsets`` (a number set: the letters
of that DLQ batch sent back) and ``version`` (one more per redrive append). A redrive append
carries :meth:`RedriveClaimStore.claim_request` in its own DynamoDB transaction: it adds its
letters on the condition that the version is still the one read, so a letter is appended by
at most one redrive, whichever way (by id, by cursor, by topic) and however many re-runs
race. ``~`` cannot start a user's producer id, so no idempotency record has this key.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .dynamo import KeysToRead, batch_get, to_item
from .legacy_redrives import LetterOrigin, candidate_keys, sent_back

CLAIMS_PREFIX = "~redrive-claims."
not_yet_claimed = "attribute_not_exists(producer_key)"
unchanged_since_read = "version = :read"


@dataclass(frozen=True)
class RedriveClaims:
    """The letters of one DLQ batch sent back so far, as read."""

    version: int = 0
    """0: no letter of the batch was sent back."""
    offsets: frozenset[int] = field(default_factory=frozenset)
    """DLQ offsets of the letters sent back."""
    sent_before_upgrade: frozenset[int] = field(default_factory=frozenset)
    """DLQ offsets of letters the previous release's redrive sent back (its records, see
    :mod:`~cirrusmq_broker.storage.legacy_redrives`): never claimed, never sent again."""

    @property
    def sent(self) -> frozenset[int]:
        """Every letter of the batch sent back, by this release or the previous one."""
        return self.offsets | self.sent_before_upgrade

    def after(self, offsets: Iterable[int]) -> RedriveClaims:
        """What the item holds once a claim of ``offsets`` based on this read commits."""
        return replace(self, version=self.version + 1, offsets=self.offsets | frozenset(offsets))


def claims_key(group: str, dlq_base: int) -> str:
    return f"{CLAIMS_PREFIX}{group}#{dlq_base}"


class RedriveClaimStore:
    def __init__(self, client: Any, table: str) -> None:
        self._client = client
        self._table = table

    def get(self, group: str, dlq_base: int, letters: Iterable[LetterOrigin] = ()) -> RedriveClaims:
        """The claims of one DLQ batch (see :meth:`get_many`)."""
        return self.get_many(group, [dlq_base], letters).get(dlq_base, RedriveClaims())

    def get_many(
        self, group: str, dlq_bases: Iterable[int], letters: Iterable[LetterOrigin] = ()
    ) -> dict[int, RedriveClaims]:
        """The claims of the DLQ batches at ``dlq_bases`` that have any, with those of
        ``letters`` (of these batches) the previous release sent back: one batched,
        consistent read of the claims items and the previous release's records."""
        letters = list(letters)
        by_key = {claims_key(group, base): base for base in set(dlq_bases)}
        legacy = candidate_keys(group, letters)
        if not by_key:
            return {}
        keys = [{"producer_key": key} for key in [*by_key, *legacy]]
        found = batch_get(self._client, [KeysToRead(self._table, keys, consistent=True)])
        items = found[self._table]
        before = sent_back(
            letters, [i["producer_key"] for i in items if i.get("producer_key") in legacy], legacy
        )
        claims = {
            by_key[item["producer_key"]]: RedriveClaims(
                int(item["version"]), frozenset(int(o) for o in item.get("offsets", ()))
            )
            for item in items
            if item.get("producer_key") in by_key
        }
        for base, offsets in before.items():
            claims[base] = replace(claims.get(base, RedriveClaims()), sent_before_upgrade=offsets)
        return claims

    def claim_request(
        self,
        group: str,
        dlq_base: int,
        read: RedriveClaims,
        offsets: Iterable[int],
        *,
        expires_at: int,
    ) -> dict[str, Any]:
        """A transaction item: add ``offsets`` to the batch's claims, on the condition that
        nothing was claimed since ``read`` (its condition fails otherwise)."""
        values: dict[str, Any] = {
            ":next": {"N": str(read.version + 1)},
            ":new": {"NS": sorted({str(o) for o in offsets})},
            ":exp": {"N": str(expires_at)},
        }
        if read.version:
            values[":read"] = {"N": str(read.version)}
        return {
            "Update": {
                "TableName": self._table,
                "Key": to_item({"producer_key": claims_key(group, dlq_base)}),
                "UpdateExpression": "SET version = :next, expires_at = :exp ADD offsets :new",
                "ConditionExpression": unchanged_since_read if read.version else not_yet_claimed,
                "ExpressionAttributeValues": values,
            }
        }
