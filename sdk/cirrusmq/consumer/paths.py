"""The consumer-group paths of the HTTP API."""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["group_path"]


def group_path(group: str, action: str = "") -> str:
    path = f"/v1/groups/{quote(group, safe='')}"
    return f"{path}/{action}" if action else path
