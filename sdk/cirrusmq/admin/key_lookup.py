"""Finding a topic's messages by key for :class:`~cirrusmq.admin.Admin`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from ..message import MessageView
from ..transport import Transport
from ..wire import read_list, read_optional_str

__all__ = ["KeyPage", "find_by_key", "find_by_key_page"]

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


@dataclass(frozen=True)
class KeyPage:
    """One page of a lookup by key."""

    messages: tuple[MessageView, ...]
    """Newest first (stored time, then queue, then offset, all descending)."""
    next_page_token: str | None
    """Pass it back for the next page; None: the search is complete. A page may hold
    fewer messages than asked for (even none) and still have a token: the service bounds
    the work of one page."""


def find_by_key_page(
    transport: Transport,
    topic: str,
    key: str,
    *,
    begin: int | datetime | None = None,
    end: int | datetime | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
    page_token: str | None = None,
) -> KeyPage:
    params = {"key": key, "limit": str(page_size)}
    if begin is not None:
        params["begin"] = str(_ms(begin))
    if end is not None:
        params["end"] = str(_ms(end))
    if page_token is not None:
        params["page_token"] = page_token
    body = transport.request("GET", f"/v1/topics/{quote(topic, safe='')}/messages", params=params)
    return KeyPage(
        tuple(MessageView.from_wire(m) for m in read_list(body, "messages")),
        read_optional_str(body, "next_page_token"),
    )


def find_by_key(
    transport: Transport,
    topic: str,
    key: str,
    *,
    begin: int | datetime | None = None,
    end: int | datetime | None = None,
    page_size: int = DEFAULT_PAGE_SIZE,
) -> Iterator[MessageView]:
    token: str | None = None
    while True:
        page = find_by_key_page(
            transport, topic, key, begin=begin, end=end, page_size=page_size, page_token=token
        )
        yield from page.messages
        if page.next_page_token is None:
            return
        token = page.next_page_token


def _ms(value: int | datetime) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(value)
