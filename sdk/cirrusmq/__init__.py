"""CirrusMQ Python SDK: a serverless message queue with RocketMQ 5 semantics.

Example::

    from cirrusmq import Credentials, Message, Producer

    with Producer("http://127.0.0.1:8080", Credentials("key", "secret")) as producer:
        receipt = producer.send(Message("orders", b"hello", tag="created"))

See docs/sdk.md for the guide.
"""

from __future__ import annotations

from .acks import AckResult, AckStatus
from .admin import (
    AccessKey,
    AccessKeySecret,
    Admin,
    GroupDescription,
    GroupQueue,
    Permissions,
    QueueOffsets,
    SubscribeGrant,
    Subscription,
    Topic,
    TopicDescription,
)
from .aio import AsyncProducer, AsyncSimpleConsumer
from .broadcast_consumer import BroadcastConsumer, MessageModel
from .consumer import SimpleConsumer
from .credentials import Credentials
from .dead_letters import DeadLetter, DeadLetterPage, RedriveSummary  # retries (issue 9)
from .errors import (
    AccessDeniedError,
    AuthenticationError,
    BadRequestError,
    ClientClosedError,
    ConflictError,
    ForbiddenError,
    MessageKeptError,
    MQError,
    NotFoundError,
    OutboxError,
    OutboxFullError,
    OutboxLockedError,
    PayloadTooLargeError,
    ProducerFencedError,  # transactions (issue 10)
    ReceiptHandleExpiredError,
    ServerError,
    SubscriptionConflictError,
    ThrottledError,
    TransactionEndedError,  # transactions (issue 10)
    TransportError,
    UnauthorizedError,
    UnsupportedFeatureError,
)
from .membership import ConsumerInfo  # consumer registration (issue 11)
from .message import ConsumeResult, FilterExpression, Message, MessageView, SendReceipt
from .offsets_admin import OffsetReset, QueueOffsetInfo, QueueReset
from .outbox import Refusal, RefusedBatch
from .producer import Producer
from .pull_consumer import PullConsumer
from .push_consumer import MessageListener, PushConsumer
from .signing import CirrusAuth
from .transaction import (  # transactions (issue 10)
    OpenTransaction,
    Transaction,
    TransactionAdmin,
    TransactionChecker,
    TransactionMessageView,
    TransactionProducer,
    TransactionReceipt,
    TransactionResolution,
)
from .transport import RetryPolicy

__version__ = "0.1.0"

__all__ = [
    "AccessDeniedError",
    "AccessKey",
    "AccessKeySecret",
    "AckResult",
    "AckStatus",
    "Admin",
    "AsyncProducer",
    "AsyncSimpleConsumer",
    "AuthenticationError",
    "BadRequestError",
    "CirrusAuth",
    "ClientClosedError",
    "ConflictError",
    "ConsumeResult",
    "ConsumerInfo",
    "Credentials",
    "FilterExpression",
    "ForbiddenError",
    "GroupDescription",
    "GroupQueue",
    "MQError",
    "Message",
    "MessageKeptError",
    "MessageListener",
    "MessageView",
    "NotFoundError",
    "OutboxError",
    "OutboxFullError",
    "OutboxLockedError",
    "PayloadTooLargeError",
    "Permissions",
    "Producer",
    "PushConsumer",
    "QueueOffsets",
    "ReceiptHandleExpiredError",
    "RefusedBatch",
    "Refusal",
    "RetryPolicy",
    "SendReceipt",
    "ServerError",
    "SimpleConsumer",
    "SubscribeGrant",
    "Subscription",
    "SubscriptionConflictError",
    "ThrottledError",
    "Topic",
    "TopicDescription",
    "TransportError",
    "UnauthorizedError",
    "UnsupportedFeatureError",
    "__version__",
    # pull / broadcast consumers, offsets and rewind
    "BroadcastConsumer",
    "MessageModel",
    "OffsetReset",
    "PullConsumer",
    "QueueOffsetInfo",
    "QueueReset",
    # retries (issue 9)
    "DeadLetter",
    "DeadLetterPage",
    "RedriveSummary",
    # transactions (issue 10)
    "OpenTransaction",
    "ProducerFencedError",
    "Transaction",
    "TransactionAdmin",
    "TransactionChecker",
    "TransactionEndedError",
    "TransactionMessageView",
    "TransactionProducer",
    "TransactionReceipt",
    "TransactionResolution",
]
