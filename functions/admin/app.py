"""AdminFunction: topics, group inspection, health, OpenAPI."""

from cirrusmq_api.app import create_app
from cirrusmq_api.routes import groups, meta, topics

app = create_app(topics.router, groups.router, meta.router)


def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
