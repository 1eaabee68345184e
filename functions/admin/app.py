"""AdminFunction: topics, group inspection, access keys, health, OpenAPI."""

from cirrusmq_api.app import create_app
from cirrusmq_api.routes import dead_letters, groups, keys, meta, topics
from cirrusmq_broker.telemetry import traced

app = create_app(
    topics.router,
    groups.router,
    keys.router,
    meta.router,
    dead_letters.router,  # retries (issue 9)
)


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
