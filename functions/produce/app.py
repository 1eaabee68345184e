"""ProduceFunction: appends message batches."""

import cirrusmq_broker.codec  # noqa: F401 - pyarrow at init: every request writes batches
from cirrusmq_api.app import create_app
from cirrusmq_api.routes import produce
from cirrusmq_broker.telemetry import traced

app = create_app(produce.router)


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
