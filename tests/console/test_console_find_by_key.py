"""The messages page's search by key in headless Chromium against a local stack."""

from __future__ import annotations

from cirrusmq import Message, Producer
from playwright.sync_api import expect

from .conftest import console_url, sign_in


def test_find_by_key_lists_the_matches_newest_first_and_inspects_one(
    page, cirrusmq_stack, admin, name
):
    admin.create_topic(name, queues=2)
    key = "<i>order</i>-9"
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        ids = [producer.send(Message(name, f"m{i}", keys=(key,))).message_id for i in range(3)]
        producer.send(Message(name, "other", keys=("order-10",)))

    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    form = page.get_by_role("form", name="Find messages by key")
    form.get_by_label("Key").fill(key)
    form.get_by_role("button", name="Find by key").click()
    results = page.get_by_role("table", name=f"Messages with key {key}, newest first")
    rows = results.locator("tbody tr")
    expect(rows).to_have_count(3)
    shown = [rows.nth(i).locator("td").nth(2).inner_text() for i in range(3)]
    assert shown == ids[::-1]
    expect(page.locator("i")).to_have_count(0)  # the key renders as text, never as HTML
    results.get_by_role("button", name=f"Inspect message {ids[0]}").click()
    expect(page.get_by_role("region", name="Message details")).to_contain_text("m0")

    form.get_by_label("Key").fill("absent")
    form.get_by_role("button", name="Find by key").click()
    expect(page.get_by_text("No messages with this key.")).to_be_visible()
