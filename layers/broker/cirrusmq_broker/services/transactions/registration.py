"""Transactional producers' registrations: a new epoch per registration fences the older
instances of a transactional id, and only the access key that registered it may use it."""

from __future__ import annotations

from collections.abc import Callable

from ...errors import AccessDenied, ProducerFenced, ProducerNotRegistered
from ...rules.transaction_state import REGISTRATION_KEEP_SECONDS, check_id
from ...storage.transactions import FenceFailed, TransactionStore
from ...validation import check_group_name


class Registrations:
    def __init__(self, *, store: TransactionStore, clock: Callable[[], int]) -> None:
        self._store = store
        self._clock = clock

    def _checked(self, producer_group: str, transactional_id: str) -> tuple[int, int]:
        """Refuse bad names; now (ms) and when a registration made now expires (s)."""
        check_group_name(producer_group)
        check_id(transactional_id, "transactional id")
        now = self._clock()
        return now, now // 1000 + REGISTRATION_KEEP_SECONDS

    def register(
        self,
        producer_group: str,
        transactional_id: str,
        *,
        access_key: str | None = None,
        admin: bool = False,
    ) -> int:
        """A new epoch for (producer group, transactional id): older instances are fenced.

        The registration records ``access_key``: only that key (or an admin) may register
        the id again, send, end or poll with it (AccessDenied otherwise)."""
        now, expires_at = self._checked(producer_group, transactional_id)
        try:
            return self._store.register(
                producer_group,
                transactional_id,
                now,
                expires_at=expires_at,
                access_key=access_key,
                take_over=admin,
            )
        except FenceFailed:
            raise foreign(producer_group, transactional_id) from None

    def register_once(
        self,
        producer_group: str,
        transactional_id: str,
        *,
        access_key: str | None = None,
        admin: bool = False,
    ) -> int:
        """The epoch of a transactional id registered for one request only: the first call
        registers it (epoch 1), a later one (the request sent again) finds that registration
        and fences nobody. Another key's registration of the id is AccessDenied (but to an
        admin)."""
        now, expires_at = self._checked(producer_group, transactional_id)
        if self._store.register_first(
            producer_group, transactional_id, now, expires_at=expires_at, access_key=access_key
        ):
            return 1
        found = self._store.registration_of(producer_group, transactional_id)
        if found is None:  # expired and deleted in between: a registration of its own
            return self.register(
                producer_group, transactional_id, access_key=access_key, admin=admin
            )
        epoch, _, owner = found
        if owner is not None and owner != access_key and not admin:
            raise foreign(producer_group, transactional_id)
        return epoch

    def fence(
        self,
        producer_group: str,
        transactional_id: str,
        epoch: int,
        access_key: str | None = None,
    ) -> int:
        """Refuse a caller whose epoch is not current (or, with ``access_key``, whose key
        did not register it); returns when its registration expires."""
        found = self._store.registration_of(producer_group, transactional_id)
        current, expires_at, owner = found if found else (None, 0, None)
        if access_key is not None and owner is not None and owner != access_key:
            raise foreign(producer_group, transactional_id)
        if current is None:
            raise ProducerNotRegistered(
                f"transactional id {transactional_id!r} is not registered in producer group "
                f"{producer_group!r}; register first"
            )
        if current != epoch:
            raise ProducerFenced(
                f"producer {transactional_id!r} epoch {epoch} was fenced by a newer "
                f"registration (epoch {current})",
                details={"epoch": epoch, "current_epoch": current},
            )
        return expires_at


def foreign(producer_group: str, transactional_id: str) -> AccessDenied:
    """The refusal of a caller whose access key did not register the transactional id."""
    return AccessDenied(
        f"access denied: transactional id {transactional_id!r} of producer group "
        f"{producer_group!r} was registered by another access key"
    )
