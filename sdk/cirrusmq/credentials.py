"""Access credentials for the CirrusMQ HTTP API."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Credentials"]


@dataclass(frozen=True)
class Credentials:
    """An access key id and its secret (the secret is kept out of ``repr``)."""

    access_key: str
    secret_key: str = field(repr=False)
