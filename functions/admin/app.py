"""AdminFunction: topics, group inspection, access keys, health, OpenAPI, web console."""

from cirrusmq_api.app import create_app
from cirrusmq_api.routes import console, dead_letters, groups, keys, meta, topics
from cirrusmq_broker.telemetry import traced

app = create_app(
    topics.router,
    groups.router,
    keys.router,
    meta.router,
    dead_letters.router,
    console.router,  # the web console's static files
)


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
