"""RocketMQ's HTTP protocol (Aliyun ``mq-http-sdk``) over CirrusMQ's broker services.

One resource, ``/topics/{topic}/messages`` at the root of the endpoint: POST publishes,
GET consumes (``trans=order``: orderly), DELETE acks. XML in and out, ``MQ id:signature``
HMAC-SHA1 signatures with CirrusMQ access keys (docs/compat.md).
"""

from __future__ import annotations

from .app import MqHttpApp

__all__ = ["MqHttpApp"]
