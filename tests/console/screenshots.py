"""Screenshots of every console page for docs/console.md (not a test).

Starts a local stack, fills it with a little of everything (topics, messages, a group with
lag and a few minutes of its metrics, a dead letter, an open transaction, a narrow access
key), then photographs each page in headless Chromium::

    .venv/bin/python tests/console/screenshots.py            # writes docs/console/*.png
    .venv/bin/python tests/console/screenshots.py --out /tmp/shots
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import httpx
from cirrusmq import (
    Admin,
    Message,
    Permissions,
    Producer,
    SimpleConsumer,
    SubscribeGrant,
    TransactionProducer,
    TransactionResolution,
    signing,
)
from cirrusmq.testing import LocalStack
from cirrusmq_broker import clock
from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[2]


def seed(stack: LocalStack) -> dict[str, str]:
    """Topics, messages, a consuming group, a dead letter, an open transaction, a key."""
    endpoint, credentials = stack.endpoint, stack.credentials
    with Admin(endpoint, credentials) as admin:
        admin.create_topic("orders", queues=1, retention_hours=72)
        admin.create_topic("audit", queues=4, message_type="FIFO")
        admin.create_topic("payments", queues=2, message_type="TRANSACTION")
        with Producer(endpoint, credentials) as producer:
            for i in range(12):
                body = json.dumps({"order": 1000 + i, "amount": 19.5 + i, "currency": "EUR"})
                producer.send(Message("orders", body, tag="created", keys=[f"order-{1000 + i}"]))
            producer.send(Message("orders", "<script>alert(1)</script>", tag="note"))
            producer.send(Message("audit", b"\x00\x01binary\xff", message_group="user-7"))
        with SimpleConsumer(endpoint, credentials, "billing", ["orders"], await_duration=0) as c:
            c.receive(1, 60)  # the group starts; then a point of its lag chart a minute
            for batch in (0, 1, 1, 2, 1, 0, 2, 2):
                stack.run_schedule("GroupMetricsFunction", "EmitGroupMetrics")
                stack.advance_time(60)
                if batch:
                    c.ack_batch(c.receive(batch, 60))
            c.receive(2, 300)  # two left in flight
            stack.run_schedule("GroupMetricsFunction", "EmitGroupMetrics")
        auth = signing.CirrusAuth(credentials)
        auth.clock_offset_s = (clock.now_ms() - time.time() * 1000) / 1000  # the stack's time
        with httpx.Client(base_url=endpoint, auth=auth) as client:
            client.post(  # a live consumer of billing (what a PushConsumer sends)
                "/v1/groups/billing/heartbeat",
                json={"client_id": "billing-worker-1", "subscriptions": {"orders": "*"}},
            ).raise_for_status()
        admin.update_group("shipping", max_delivery_attempts=1)
        with SimpleConsumer(endpoint, credentials, "shipping", ["orders"], await_duration=0) as c:
            [poison] = c.receive(1, 60)
            c.nack(poison)
            c.ack_batch(c.receive(3, 60))
        admin.create_access_key(
            Permissions(subscribe=(SubscribeGrant(groups=("billing",), topics=("orders",)),)),
            description="billing service (read orders)",
        )
    producer = TransactionProducer(
        endpoint,
        credentials,
        producer_group="checkout",
        checker=lambda view: TransactionResolution.COMMIT,
        transactional_id="checkout-1",
    )
    tx = producer.begin_transaction()
    tx.send(Message("payments", b'{"payment": 77}', keys=("order-1007",)))
    return {"dead": poison.message_id, "producer": producer}  # type: ignore[dict-item]


def seed_trace(stack: LocalStack) -> str:
    """A traced topic and one message's life through a nack and a redelivery to its ack."""
    endpoint, credentials = stack.endpoint, stack.credentials
    with Admin(endpoint, credentials) as admin:
        admin.create_topic("shipments", queues=2, trace=True)
    with Producer(endpoint, credentials) as producer:
        message_id = producer.send(Message("shipments", b'{"parcel": 4711}')).message_id
    with SimpleConsumer(endpoint, credentials, "labels", ["shipments"], await_duration=0) as c:
        [first] = c.receive(1, 60)
        c.nack(first)
        stack.advance_time(11)  # the first retry level (10 s)
        c.ack_batch(c.receive(1, 60))
    return message_id


def shoot(page: Page, out: Path, name: str) -> None:
    page.wait_for_load_state("networkidle")
    path = out / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "console")
    out = parser.parse_args().out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with LocalStack(schedules=False) as stack:
        seeded = seed(stack)
        base = f"{stack.endpoint}/console/"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=shutil.which("chromium"), args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1280, "height": 760})
            page.on("dialog", lambda dialog: dialog.accept())
            page.goto(base)
            page.get_by_label("Access key").fill(stack.credentials.access_key)
            shoot(page, out, "sign-in")
            page.get_by_label("Secret key").fill(stack.credentials.secret_key)
            page.get_by_role("button", name="Sign in").click()
            expect(page.get_by_role("link", name="orders")).to_be_visible()
            shoot(page, out, "topics")
            page.goto(base + "#/topics/orders")
            page.get_by_role("button", name="Inspect message").first.click()
            page.get_by_label("Body view").select_option("json")
            shoot(page, out, "messages")
            page.goto(base + "#/groups")
            expect(page.get_by_role("table", name="Consumer groups")).to_be_visible()
            shoot(page, out, "groups")
            page.goto(base + "#/groups/billing")
            expect(page.get_by_role("table", name="Lag per minute")).to_be_visible()
            expect(page.get_by_label("Total lag")).to_be_visible()
            shoot(page, out, "group")
            page.goto(base + "#/dead-letters/shipping")
            page.get_by_role("button", name=f"Inspect dead letter {seeded['dead']}").click()
            shoot(page, out, "dead-letters")
            page.goto(base + "#/transactions/checkout")
            expect(page.get_by_role("table", name="Open transactions of checkout")).to_be_visible()
            shoot(page, out, "transactions")
            page.goto(base + "#/keys")
            expect(page.get_by_role("table", name="Access keys")).to_be_visible()
            shoot(page, out, "access-keys")
            traced = seed_trace(stack)
            page.goto(base + f"#/trace/shipments/{traced}")
            expect(page.get_by_role("list", name=f"Trace of message {traced}")).to_be_visible()
            shoot(page, out, "trace")
            browser.close()
        seeded["producer"].close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
