"""A large message in the console: its size and SHA-256 with a Download link (the presigned
URL of the lookup answer), never its body loaded into the page."""

from __future__ import annotations

import hashlib
import re

import httpx
from cirrusmq import Message, Producer
from playwright.sync_api import expect

from .conftest import REQUEST_TIMEOUT_S, console_url, sign_in

BODY = b"large body bytes " * 200


def test_a_large_body_shows_its_size_digest_and_a_download_link(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    with Producer(
        cirrusmq_stack.endpoint,
        cirrusmq_stack.credentials,
        large_body_threshold_bytes=0,
        request_timeout_s=REQUEST_TIMEOUT_S,
    ) as producer:
        message_id = producer.send(Message(name, BODY)).message_id
    digest = hashlib.sha256(BODY).hexdigest()
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    preview = page.locator("td.preview")
    expect(preview).to_have_text(f"large body {len(BODY)} B, sha256 {digest[:16]}…")

    page.get_by_label("Message ID").fill(message_id)
    page.get_by_role("button", name="Look up").click()
    details = page.get_by_role("region", name="Message details")
    expect(details).to_contain_text(message_id)
    expect(details).to_contain_text(f"{len(BODY)} bytes (large body)")
    expect(details).to_contain_text(digest)
    expect(details).not_to_contain_text("PayloadS3Pointer")
    expect(page.get_by_label("Message body")).to_have_count(0)
    link = details.get_by_role("link", name=re.compile("^Download"))
    href = link.get_attribute("href")
    assert href and href.startswith("http")
    downloaded = httpx.get(href, timeout=REQUEST_TIMEOUT_S).content
    assert downloaded == BODY  # the link is the body's presigned GET
    assert not [url for url in requested if url == href]  # the page never loaded it
