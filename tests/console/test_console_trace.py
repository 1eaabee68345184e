"""The console's message trace page in headless Chromium against a local stack."""

from __future__ import annotations

from cirrusmq import Message, Producer, SimpleConsumer
from playwright.sync_api import expect

from .conftest import console_url, sign_in

NACK_BACKOFF_S = 10
"""The first retry level: a nacked message is delivered again this long after the nack."""


def test_trace_a_message_through_a_nack_and_a_redelivery_to_its_ack(
    page, cirrusmq_stack, admin, name
):
    admin.create_topic(name, queues=1, trace=True)
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with Producer(endpoint, credentials) as producer:
        message_id = producer.send(Message(name, "<b>not bold</b>")).message_id
    group = f"g-{name}"
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        [first] = consumer.receive(1, 30)
        consumer.nack(first)
        cirrusmq_stack.advance_time(NACK_BACKOFF_S + 1)
        [second] = consumer.receive(1, 30)
        assert second.message_id == message_id
        consumer.ack(second)

    sign_in(page, cirrusmq_stack)
    # reached from the messages page's lookup result
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    page.get_by_role("form", name="Look up a message").get_by_label("Message ID").fill(message_id)
    page.get_by_role("button", name="Look up").click()
    details = page.get_by_role("region", name="Message details")
    details.get_by_role("link", name="Message trace").click()

    timeline = page.get_by_role("list", name=f"Trace of message {message_id}")
    kinds = timeline.locator(".kind")
    expect(kinds).to_have_count(6)
    assert [k.get_attribute("data-kind") for k in kinds.all()] == [
        "sent",
        "delivered",
        "nacked",
        "moved_to_retry",
        "delivered",
        "acked",
    ]
    items = timeline.get_by_role("listitem")
    expect(items.nth(1)).to_contain_text("(attempt 1)")
    expect(items.nth(1)).to_contain_text(group)
    expect(items.nth(4)).to_contain_text("(attempt 2)")
    expect(items.nth(5)).to_contain_text("(attempt 2)")
    expect(page.locator("b")).to_have_count(0)  # nothing of the message renders as HTML


def test_the_trace_page_takes_a_topic_and_a_message_id(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1, trace=True)
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        message_id = producer.send(Message(name, "hello")).message_id
    sign_in(page, cirrusmq_stack)
    page.get_by_role("link", name="Message trace").click()
    form = page.get_by_role("form", name="Trace a message")
    form.get_by_label("Topic").fill(name)
    form.get_by_label("Message ID").fill(message_id)
    form.get_by_role("button", name="Trace").click()
    timeline = page.get_by_role("list", name=f"Trace of message {message_id}")
    expect(timeline.get_by_role("listitem")).to_have_count(1)
    expect(timeline.locator(".kind")).to_have_text(["Sent"])


def test_a_message_without_a_trace_is_an_error_not_an_empty_page(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1, trace=True)
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/trace/{name}/01JAAAAAAAAAAAAAAAAAAAAAAA"))
    expect(page.get_by_role("alert", name="Error")).to_contain_text("MessageNotFound")


def test_a_topic_created_with_trace_shows_it_on(page, cirrusmq_stack, admin, name):
    sign_in(page, cirrusmq_stack)
    form = page.get_by_role("form", name="Create topic")
    form.get_by_label("Name").fill(name)
    form.get_by_label("Message trace").check()
    form.get_by_role("button", name="Create topic").click()
    row = page.get_by_role("table", name="Topics this key may see").get_by_role("row")
    expect(row.filter(has_text=name).get_by_role("cell").nth(7)).to_have_text("on")
    assert admin.describe_topic(name).topic.trace is True
    page.get_by_role("link", name=name).click()
    expect(page.get_by_role("definition").filter(has_text="on")).to_have_count(1)


def test_a_message_of_an_untraced_topic_offers_no_trace(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    with Producer(cirrusmq_stack.endpoint, cirrusmq_stack.credentials) as producer:
        message_id = producer.send(Message(name, "plain")).message_id
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    page.get_by_role("button", name=f"Inspect message {message_id}").click()
    details = page.get_by_role("region", name="Message details")
    expect(details).to_contain_text(message_id)
    expect(details.get_by_role("link", name="Message trace")).to_have_count(0)
