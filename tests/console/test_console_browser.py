"""The web console in headless Chromium against a local stack: what an operator does."""

from __future__ import annotations

import re

from cirrusmq import (
    FilterExpression,
    Message,
    Permissions,
    Producer,
    SimpleConsumer,
    SubscribeGrant,
    signing,
)
from playwright.sync_api import expect

from .conftest import CREDENTIALS_KEY, console_url, sign_in

SCRIPT_BODY = "<script>alert(1)</script>"


def send(stack, topic: str, *bodies: str | bytes, tag: str | None = None) -> list[str]:
    """Send ``bodies`` to ``topic``; their message ids."""
    with Producer(stack.endpoint, stack.credentials) as producer:
        return [producer.send(Message(topic, body, tag=tag)).message_id for body in bodies]


def stored_credentials(page) -> str | None:
    return page.evaluate(f"sessionStorage.getItem({CREDENTIALS_KEY!r})")


def test_js_signer_matches_the_python_reference(page, cirrusmq_stack):
    """The browser's WebCrypto signer and sdk/cirrusmq/signing.py sign alike."""
    cases = [
        ("GET", "/v1/topics", "", b""),
        (
            "GET",
            "/v1/topics/a%20b%2Fc/queues/0/messages",
            "offset=5&max_messages=20&filter=TagA+%7C%7C+TagB&z=%E2%9C%93&a=1&a=0&empty",
            b"",
        ),
        ("GET", "/v1/topics/t/offsets", "q=it's(1)*!~&b=%2B+x&A=upper", b""),
        ("POST", "/v1/topics", "", '{"name": "çà-✓", "queues": 2}'.encode()),
        ("DELETE", "/v1/keys/AK%C3%A9", "", b"\x00\xff binary"),
    ]
    now, nonce, secret = 1_795_000_000.0, "nonce_0123456789-ABCDEF", "s3cr\u00e9t/+=key"
    date = signing.format_date(now)
    expected = [
        signing.signature(secret, signing.string_to_sign(m, p, q, date, nonce, body))
        for m, p, q, body in cases
    ]
    page.goto(console_url(cirrusmq_stack))
    got = page.evaluate(
        """async ([cases, now, nonce, secret]) => {
            const signing = await import("./signing.js");
            const out = [];
            for (const [method, path, query, body] of cases) {
                const headers = await signing.sign(method, path, query, new Uint8Array(body),
                    {accessKey: "AK", secretKey: secret}, {now: now * 1000, nonce});
                out.push([headers["X-Cirrus-Date"], headers["X-Cirrus-Nonce"],
                          headers["Authorization"]]);
            }
            return out;
        }""",
        [[[m, p, q, list(body)] for m, p, q, body in cases], now, nonce, secret],
    )
    assert got == [
        [date, nonce, f"CIRRUS-HMAC-SHA256 Credential=AK, Signature={sig}"] for sig in expected
    ]


def test_sign_in_shows_a_topic_and_its_messages_and_never_sends_the_secret(
    page, cirrusmq_stack, admin, name
):
    admin.create_topic(name, queues=2)
    json_id, _ = send(cirrusmq_stack, name, '{"order": 1}', "second", tag="TagA")
    sent: list[str] = []
    page.on(
        "request",
        lambda r: sent.append(f"{r.url} {r.all_headers()} {r.post_data or ''}"),
    )
    sign_in(page, cirrusmq_stack)
    topics = page.get_by_role("table", name="Topics this key may see")
    row = topics.get_by_role("row").filter(has_text=name)
    expect(row).to_contain_text("NORMAL")
    expect(row.get_by_role("cell").nth(3)).to_have_text("2")  # messages written
    row.get_by_role("link", name=name).click()
    expect(page.get_by_role("heading", name=f"Topic {name}")).to_be_visible()
    messages = page.get_by_role("table", name=re.compile("^Messages of queue"))
    expect(messages.get_by_role("row")).not_to_have_count(1)
    found = admin.describe_topic(name)
    shown = sum(q.max_offset for q in found.queue_offsets)
    assert shown == 2
    # both queues browsed in turn: every message appears on its queue's page
    bodies = []
    for queue in (0, 1):
        page.get_by_label("Queue", exact=True).select_option(str(queue))
        page.get_by_label("Offset").fill("0")
        page.get_by_role("button", name="Browse").click()
        shown = page.get_by_role("table", name=f"Messages of queue {queue} from offset 0")
        expect(shown).to_be_visible()
        bodies += page.locator("td.preview").all_inner_texts()
    assert sorted(bodies) == sorted(['{"order": 1}', "second"])
    # looked up by id: the JSON view pretty-prints, the hex view dumps the bytes
    page.get_by_label("Message ID").fill(json_id)
    page.get_by_role("button", name="Look up").click()
    details = page.get_by_role("region", name="Message details")
    expect(details).to_contain_text(json_id)
    body = page.get_by_label("Message body")
    expect(body).to_have_text('{"order": 1}')
    page.get_by_label("Body view").select_option("json")
    expect(body).to_have_text('{\n  "order": 1\n}')
    page.get_by_label("Body view").select_option("hex")
    expect(body).to_contain_text("00000000  ")
    secret = cirrusmq_stack.credentials.secret_key
    assert sent and not [line for line in sent if secret in line]
    assert cirrusmq_stack.credentials.access_key in (stored_credentials(page) or "")


def test_a_wrong_secret_is_refused_with_a_clear_message(page, cirrusmq_stack):
    page.goto(console_url(cirrusmq_stack))
    page.get_by_label("Access key").fill(cirrusmq_stack.credentials.access_key)
    page.get_by_label("Secret key").fill("not-the-secret-key")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("Sign-in refused: the access key or secret key is wrong")
    expect(alert).to_contain_text("HTTP 401")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    assert stored_credentials(page) is None


def test_a_narrow_key_sees_only_its_permitted_topics(page, cirrusmq_stack, admin, name):
    allowed, hidden = f"{name}-allowed", f"{name}-hidden"
    admin.create_topic(allowed, queues=1)
    admin.create_topic(hidden, queues=1)
    narrow = admin.create_access_key(
        Permissions(subscribe=(SubscribeGrant(groups=("g-*",), topics=(allowed,)),)),
        description="console narrow key",
    )
    sign_in(page, cirrusmq_stack, narrow.credentials)
    topics = page.get_by_role("table", name="Topics this key may see")
    expect(topics.get_by_role("link", name=allowed)).to_be_visible()
    expect(topics).not_to_contain_text(hidden)
    page.get_by_role("link", name="Access keys").click()
    expect(page.get_by_role("alert")).to_contain_text("HTTP 403")
    expect(page.get_by_role("table", name="Access keys")).to_have_count(0)


def test_a_script_body_shows_as_text(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    send(cirrusmq_stack, name, SCRIPT_BODY)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/topics/{name}"))
    cell = page.locator("td.preview")
    expect(cell).to_have_text(SCRIPT_BODY)
    page.get_by_role("button", name=re.compile("^Inspect message")).click()
    expect(page.get_by_label("Message body")).to_have_text(SCRIPT_BODY)
    assert page.locator("main script").count() == 0
    assert dialogs == []


def emit_group_metrics(stack) -> None:
    """Run the GroupMetricsFunction once (its schedule is off in these tests)."""
    stack.run_schedule("GroupMetricsFunction", "EmitGroupMetrics")


def test_a_groups_lag_falls_as_it_consumes(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)  # a group describes the queues it has taken from
    send(cirrusmq_stack, name, *[f"m{i}" for i in range(10)])
    group = f"g-{name}"
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        first = consumer.receive(4, 30)
        consumer.ack_batch(first)
        emit_group_metrics(cirrusmq_stack)  # a point of the lag chart: 6
        sign_in(page, cirrusmq_stack)
        page.goto(console_url(cirrusmq_stack, f"#/groups/{group}"))
        lag = page.get_by_label("Total lag")
        expect(lag).to_have_text("6")
        assert admin.describe_group(group, name).lag == 6
        expect(page.get_by_role("table", name="Queues")).to_contain_text(name)
        points = page.get_by_role("table", name="Lag per minute")
        expect(points.locator("tbody tr")).to_have_count(1)
        expect(points.locator("tbody tr").nth(0).locator("td").nth(2)).to_have_text("6")
        cirrusmq_stack.advance_time(60)  # the next minute
        while got := consumer.receive(16, 30):
            consumer.ack_batch(got)
        emit_group_metrics(cirrusmq_stack)  # the next point: 0
        page.get_by_role("button", name="Refresh").click()
        expect(lag).to_have_text("0")
        expect(points.locator("tbody tr")).to_have_count(2)
        lags = points.locator("tbody tr td:nth-child(3)")
        expect(lags).to_have_text(["6", "0"])
        chart = page.get_by_role("img", name=re.compile(f"^Lag of group {group}"))
        expect(chart).to_have_attribute("aria-label", re.compile("from 6 to 0 messages"))
        assert chart.locator("polyline").count() == 1
    # rewind to the earliest (after a confirmation): the lag is back to everything
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_label("Rewind to").select_option("earliest")
    page.get_by_role("button", name="Rewind").click()
    status = page.get_by_role("status", name="Status")
    expect(status).to_contain_text(f"Rewound {group} on {name} to earliest")
    expect(lag).to_have_text("10")


def test_the_group_page_shows_the_subscription_filter_and_its_type(
    page, cirrusmq_stack, admin, name
):
    admin.create_topic(name, queues=1)
    group = f"g-{name}"
    admin.subscribe(group, name, FilterExpression.sql("region IN ('eu') AND a > 5"))
    sign_in(page, cirrusmq_stack)
    page.goto(console_url(cirrusmq_stack, f"#/groups/{group}"))
    subscriptions = page.get_by_role("table", name="Subscriptions")
    row = subscriptions.locator("tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td")).to_have_text([name, "SQL92", "region IN ('eu') AND a > 5"])


def test_the_group_list_shows_only_the_groups_a_narrow_key_may_see(
    page, cirrusmq_stack, admin, name
):
    allowed, hidden = f"{name}-allowed", f"{name}-hidden"
    admin.create_topic(allowed, queues=1)
    admin.create_topic(hidden, queues=1)
    send(cirrusmq_stack, allowed, "a")
    send(cirrusmq_stack, hidden, "b")
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    for group, topic in ((f"g-{name}", allowed), (f"h-{name}", hidden)):
        with SimpleConsumer(endpoint, credentials, group, [topic], await_duration=0) as consumer:
            consumer.ack_batch(consumer.receive(1, 30))
    narrow = admin.create_access_key(
        Permissions(subscribe=(SubscribeGrant(groups=("g-*",), topics=(allowed,)),)),
        description="console narrow group key",
    )
    sign_in(page, cirrusmq_stack, narrow.credentials)
    page.get_by_role("link", name="Groups").click()
    groups = page.get_by_role("table", name="Consumer groups")
    expect(groups).to_contain_text(f"g-{name}")
    expect(groups).not_to_contain_text(f"h-{name}")
    expect(groups).not_to_contain_text(hidden)
    expect(page.get_by_role("main")).not_to_contain_text("null")  # no recent groups yet
    page.get_by_role("link", name=f"Open group g-{name}").click()
    expect(page.get_by_label("Total lag")).to_have_text("0")
    expect(page.get_by_role("table", name="Queues")).to_contain_text(allowed)


def test_a_dead_letter_is_redriven(page, cirrusmq_stack, admin, name):
    admin.create_topic(name, queues=1)
    group = f"g-{name}"
    admin.update_group(group, max_delivery_attempts=1)
    send(cirrusmq_stack, name, "poison")
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    with SimpleConsumer(endpoint, credentials, group, [name], await_duration=0) as consumer:
        [message] = consumer.receive(1, 30)
        consumer.nack(message)
        sign_in(page, cirrusmq_stack)
        page.goto(console_url(cirrusmq_stack, f"#/dead-letters/{group}"))
        letters = page.get_by_role("table", name="Dead letters")
        row = letters.get_by_role("row").filter(has_text=message.message_id)
        expect(row).to_contain_text(name)
        expect(row).to_contain_text("poison")
        page.get_by_role("button", name=f"Inspect dead letter {message.message_id}").click()
        expect(page.get_by_label("Dead letter body")).to_have_text("poison")
        page.get_by_label(f"Select {message.message_id}").check()
        page.get_by_role("button", name="Redrive selected").click()
        expect(page.get_by_role("status", name="Status")).to_contain_text("Redrove 1 dead letter")
        expect(row.get_by_role("cell").nth(7)).to_have_text("yes")  # redriven
        [back] = consumer.receive(1, 30)
        assert back.message_id == message.message_id
        consumer.ack(back)


def test_an_access_key_is_created_disabled_and_deleted(page, cirrusmq_stack, admin, name):
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, cirrusmq_stack)
    page.get_by_role("link", name="Access keys").click()
    page.get_by_label("Description").fill(name)
    page.get_by_label("Publish to topics").fill(f"{name}-*")
    page.get_by_role("button", name="Create key").click()
    created = page.get_by_role("region", name="New access key")
    expect(created).to_contain_text(f"publish: {name}-*")
    [key] = [k for k in admin.list_access_keys() if k.description == name]
    expect(created).to_contain_text(key.access_key)
    row = page.get_by_role("table", name="Access keys").get_by_role("row").filter(has_text=name)
    expect(row).to_contain_text("ACTIVE")
    page.get_by_role("button", name=f"Disable key {key.access_key}").click()
    expect(row).to_contain_text("DISABLED")
    page.get_by_role("button", name=f"Delete key {key.access_key}").click()
    expect(page.get_by_role("status", name="Status")).to_contain_text(f"Deleted {key.access_key}")
    expect(row).to_have_count(0)
    assert [k for k in admin.list_access_keys() if k.description == name] == []


def test_an_open_transaction_is_rolled_back(page, cirrusmq_stack, admin, name):
    from cirrusmq import TransactionProducer, TransactionResolution

    admin.create_topic(name, queues=1, message_type="TRANSACTION")
    group = f"pg-{name}"
    with TransactionProducer(
        cirrusmq_stack.endpoint,
        cirrusmq_stack.credentials,
        producer_group=group,
        checker=lambda view: TransactionResolution.ROLLBACK,
        transactional_id=f"{name}-1",
    ) as producer:
        tx = producer.begin_transaction()
        tx.send(Message(name, "half"))
        page.on("dialog", lambda dialog: dialog.accept())
        sign_in(page, cirrusmq_stack)
        page.get_by_role("link", name="Transactions").click()
        page.get_by_label("Producer group").fill(group)
        page.get_by_role("button", name="Show transactions").click()
        table = page.get_by_role("table", name=f"Open transactions of {group}")
        expect(table).to_contain_text(tx.id)
        page.get_by_role("button", name=f"Roll back {tx.id}").click()
        expect(page.get_by_role("status", name="Status")).to_contain_text("ROLLED_BACK")
        expect(table).to_contain_text("No open transactions.")
    assert sum(q.max_offset for q in admin.describe_topic(name).queue_offsets) == 0
