""":class:`TransactionAdmin`: operators list a producer group's open transactions and end one
by hand."""

from __future__ import annotations

from typing import Any

from ..credentials import Credentials
from ..transport import Transport
from ..wire import read_bool, read_list, read_mapping
from .models import OpenTransaction, TransactionResolution, group_path, transaction_path

__all__ = ["TransactionAdmin"]


class TransactionAdmin:
    """Operators (admin keys): list a producer group's undecided transactions, end one."""

    def __init__(
        self,
        endpoint: str,
        credentials: Credentials | None = None,
        *,
        transport: Transport | None = None,
    ) -> None:
        self._own_transport = transport is None
        self._transport = transport or Transport(endpoint, credentials)

    def list_open(self, producer_group: str) -> list[OpenTransaction]:
        body = self._transport.request("GET", f"{group_path(producer_group)}/transactions")
        return [OpenTransaction.from_wire(t) for t in read_list(read_mapping(body), "transactions")]

    def describe(self, producer_group: str, transaction_id: str) -> OpenTransaction:
        return OpenTransaction.from_wire(
            self._transport.request("GET", transaction_path(producer_group, transaction_id))
        )

    def resolve(
        self, producer_group: str, transaction_id: str, resolution: TransactionResolution
    ) -> bool:
        """Commit or roll back by hand; False when that verdict had been applied before."""
        if resolution is TransactionResolution.UNKNOWN:
            raise ValueError("resolve with COMMIT or ROLLBACK")
        body = self._transport.request(
            "POST",
            f"{transaction_path(producer_group, transaction_id)}/resolve",
            json_body={"resolution": resolution.value},
        )
        return read_bool(read_mapping(body), "changed")

    def close(self) -> None:
        if self._own_transport:
            self._transport.close()

    def __enter__(self) -> TransactionAdmin:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()
