"""TransactionsFunction: half sends, verdicts, check polls, the operators' view and
exactly-once consume -> produce steps."""

import cirrusmq_broker.codec  # noqa: F401 - pyarrow at init: half sends write batches
from cirrusmq_api.app import create_app
from cirrusmq_api.routes import steps, transactions
from cirrusmq_broker.telemetry import traced

app = create_app(transactions.router, steps.router)


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
