"""docs/transactions.md's exactly-once stages (a simple consumer's, then a push consumer's)
run as written and enrich each order once.

(It also runs with every other snippet, in reading order, in test_docs_in_order.py.)
"""

from __future__ import annotations

from cirrusmq import SimpleConsumer
from docs_snippets import snippets


def test_the_enriching_stage_of_the_guide_sends_each_order_once_and_acks_it(cirrusmq_stack):
    example, push = [s for s in snippets("docs/transactions.md") if "exactly_once" in s.code]
    endpoint, credentials = cirrusmq_stack.endpoint, cirrusmq_stack.credentials
    namespace = {"endpoint": endpoint, "credentials": credentials}
    exec(example.compiled(), namespace)  # noqa: S102

    with SimpleConsumer(endpoint, credentials, "reader", ["orders-enriched"], 0) as reader:
        assert [m.body for m in reader.receive(10, 30)] == [b"order-7 customer=42"]
    cirrusmq_stack.advance_time(31)
    with SimpleConsumer(endpoint, credentials, "enricher", ["orders-in"], 0) as stage:
        assert stage.receive(10, 30) == []  # acked by the step: nothing comes back

    exec(push.compiled(), namespace)  # noqa: S102  (the names the first one defined)
    with SimpleConsumer(endpoint, credentials, "reader-2", ["orders-enriched"], 0) as reader:
        assert sorted(m.body for m in reader.receive(10, 30)) == [
            b"order-7 customer=42",
            b"order-8 customer=42",
        ]
    cirrusmq_stack.advance_time(61)
    with SimpleConsumer(endpoint, credentials, "enricher", ["orders-in"], 0) as stage:
        assert stage.receive(10, 30) == []  # acked by the push consumer's step
