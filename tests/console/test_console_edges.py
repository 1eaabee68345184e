"""The console where a newcomer stumbled: confirmations, missing things shown as missing,
narrow screens, odd bodies and odd links."""

from __future__ import annotations

from cirrusmq import SimpleConsumer
from playwright.sync_api import expect

from .conftest import console_url, sign_in
from .test_console_browser import send


def test_rewind_asks_first_and_does_nothing_when_refused(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    send(cirrusmq_stack, name, "a", "b", "c")
    group = f"g-{name}"
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        consumer.ack_batch(consumer.receive(3, 30))
    dialogs: list[str] = []
    answer = {"accept": False}

    def on_dialog(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.accept() if answer["accept"] else dialog.dismiss()

    page.on("dialog", on_dialog)
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/groups/{group}"))
    lag = page.get_by_label("Total lag")
    expect(lag).to_have_text("0")
    page.get_by_label("Rewind to").select_option("earliest")
    page.get_by_role("button", name="Rewind").click()
    page.get_by_role("button", name="Refresh").click()  # runs after the refused rewind
    expect(page.get_by_role("status", name="Status")).to_contain_text("Refreshed at")
    assert len(dialogs) == 1 and "in flight" in dialogs[0], dialogs
    expect(lag).to_have_text("0")
    assert admin.describe_group(group, name).lag == 0
    answer["accept"] = True
    page.get_by_label("Rewind to").select_option("earliest")  # the refresh reset the form
    page.get_by_role("button", name="Rewind").click()
    expect(lag).to_have_text("3")


def test_sign_out_hides_the_navigation(page, cirrusmq_stack):
    sign_in(page, cirrusmq_stack)
    nav = page.get_by_role("navigation", name="Pages")
    expect(nav).to_be_visible()
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("Access key")).to_be_visible()
    expect(nav).to_be_hidden()


def test_a_link_with_a_bad_escape_shows_the_topics_page(page, cirrusmq_stack):
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, "#/topics/%"))
    expect(page.get_by_role("alert", name="Error")).to_contain_text("not a valid link")
    expect(page.get_by_role("table", name="Topics this key may see")).to_be_visible()


def test_an_unknown_group_is_shown_as_unknown(page, cirrusmq_stack, name):
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/groups/nosuch-{name}"))
    expect(page.get_by_role("main")).to_contain_text(f"No such group: nosuch-{name}")
    expect(page.get_by_label("Total lag")).to_have_count(0)


def test_the_group_list_shows_each_groups_lag(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    send(cirrusmq_stack, name, *[f"m{i}" for i in range(5)])
    group = f"g-{name}"
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        consumer.ack_batch(consumer.receive(2, 30))
    sign_in(page, cirrusmq_stack)
    page.get_by_role("link", name="Groups").click()
    groups = page.get_by_role("table", name="Consumer groups")
    expect(groups.get_by_role("columnheader", name="Lag")).to_be_visible()
    row = groups.get_by_role("row").filter(has_text=group)
    expect(row.get_by_role("cell").nth(2)).to_have_text("3")


def test_the_dead_letters_page_lists_the_groups_that_have_some(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    group = f"g-{name}"
    admin.update_group(group, max_delivery_attempts=1)
    send(cirrusmq_stack, name, "poison")
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        [message] = consumer.receive(1, 30)
        consumer.nack(message)
    sign_in(page, cirrusmq_stack)
    page.get_by_role("link", name="Dead letters").click()
    listed = page.get_by_role("table", name="Groups with dead letters")
    expect(listed).to_contain_text(group)
    listed.get_by_role("link", name=f"Dead letters of {group}").click()
    expect(page.get_by_role("table", name="Dead letters")).to_contain_text(message.message_id)


def test_the_transactions_page_keeps_the_group_it_shows(page, cirrusmq_stack, name):
    sign_in(page, cirrusmq_stack)
    page.get_by_role("link", name="Transactions").click()
    page.get_by_label("Producer group").fill(f"pg-{name}")
    page.get_by_role("button", name="Show transactions").click()
    expect(page.get_by_role("table", name=f"Open transactions of pg-{name}")).to_be_visible()
    expect(page.get_by_label("Producer group")).to_have_value(f"pg-{name}")


def test_a_binary_body_preview_escapes_control_characters(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    send(cirrusmq_stack, name, b"\x00\x01ab\x1b[2J\x7f")
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    expect(page.locator("td.preview")).to_have_text("\\x00\\x01ab\\x1b[2J\\x7f")


def test_the_messages_page_fits_a_narrow_screen(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    send(cirrusmq_stack, name, "x" * 300)
    page.set_viewport_size({"width": 420, "height": 800})
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    expect(page.locator("td.preview")).to_have_count(1)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 420, width


def test_a_key_is_created_with_several_subscribe_grants(page, cirrusmq_stack, admin, name):
    sign_in(page, cirrusmq_stack)
    page.get_by_role("link", name="Access keys").click()
    page.get_by_label("Description").fill(name)
    page.get_by_label("Subscribe as groups", exact=True).fill("billing")
    page.get_by_label("Subscribe to topics", exact=True).fill("orders")
    page.get_by_role("button", name="Add subscribe grant").click()
    page.get_by_label("Subscribe as groups (grant 2)").fill("audit-*")
    page.get_by_label("Subscribe to topics (grant 2)").fill("payments, refunds")
    page.get_by_role("button", name="Create key").click()
    created = page.get_by_role("region", name="New access key")
    expect(created).to_contain_text("subscribe: groups audit-* on topics payments, refunds")
    [key] = [k for k in admin.list_access_keys() if k.description == name]
    grants = [(g.groups, g.topics) for g in key.permissions.subscribe]
    assert grants == [(("billing",), ("orders",)), (("audit-*",), ("payments", "refunds"))]


def test_a_retry_topic_shows_as_queues_and_is_not_offered_to_rewind(
    page, cirrusmq_stack, admin, name
):
    """A nacked message waits in the group's retry topic, which the group has not read yet:
    the group's page shows that queue (its lag counts), and Rewind offers the user topic
    only (the API refuses a rewind of an internal topic)."""
    admin.create_topic(name, queues=1)
    send(cirrusmq_stack, name, "a")
    group = f"g-{name}"
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        [message] = consumer.receive(1, 30)
        consumer.nack(message)
    retry = f"retry.{group}.{name}"
    assert {q.topic for q in admin.describe_group(group).queues} == {name, retry}
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/groups/{group}"))
    expect(page.get_by_label("Total lag")).to_have_text("1")
    expect(page.get_by_role("table", name="Queues")).to_contain_text(retry)
    offered = page.get_by_role("form", name="Rewind").get_by_label("Topic").locator("option")
    expect(offered).to_have_text([name])
