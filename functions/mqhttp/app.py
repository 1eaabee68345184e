"""MqHttpFunction: RocketMQ's HTTP protocol (mq-http-sdk) at /topics/{topic}/messages."""

import cirrusmq_broker.codec  # noqa: F401 - pyarrow at init: publishes write batches
from cirrusmq_api.compat.mqhttp import MqHttpApp
from cirrusmq_broker.telemetry import traced

app = MqHttpApp()


@traced
def lambda_handler(event: dict, context: object) -> dict:
    return app.resolve(event, context)
