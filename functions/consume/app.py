"""ConsumeFunction: receive, ack, change invisible duration, look up."""

import cirrusmq_broker.codec  # noqa: F401 - pyarrow at init: every request reads batches
from cirrusmq_api.app import create_app
from cirrusmq_api.routes import consume, consumers, offsets, retries
from cirrusmq_broker.telemetry import traced

app = create_app(consume.router, offsets.router, retries.router, consumers.router)


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
