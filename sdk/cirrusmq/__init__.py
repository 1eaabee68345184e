"""CirrusMQ Python SDK: a serverless message queue with RocketMQ 5 semantics.

Example::

    from cirrusmq import Credentials, Message, Producer

    with Producer("http://127.0.0.1:8080", Credentials("key", "secret")) as producer:
        receipt = producer.send(Message("orders", b"hello", tag="created"))

See docs/sdk.md for the guide. The package is laid out by role: ``producer``, ``outbox``,
``consumer``, ``transaction``, ``admin`` and ``cli``, around a shared core (``transport``,
``signing``, ``errors``, ``config``, ``message``, ``wire``); every public name is importable
from here.
"""

from __future__ import annotations

from .admin import (
    AccessKey,
    AccessKeySecret,
    Admin,
    DeadLetter,
    DeadLetterPage,
    GroupDescription,
    GroupMetrics,
    GroupQueue,
    GroupSummary,
    KeyPage,
    OffsetReset,
    Permissions,
    QueueOffsetInfo,
    QueueOffsets,
    QueueReset,
    RedriveSummary,
    SubscribeGrant,
    Subscription,
    Topic,
    TopicDescription,
    TraceEvent,
)
from .consumer import (
    AckResult,
    AckStatus,
    AsyncSimpleConsumer,
    BroadcastConsumer,
    ConsumerInfo,
    MessageListener,
    MessageModel,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from .credentials import Credentials
from .errors import (
    AccessDeniedError,
    AuthenticationError,
    BadRequestError,
    ClientClosedError,
    ConflictError,
    ForbiddenError,
    InvalidLargeBodyError,
    LargeBodyError,
    LeaseMovedOnError,
    MessageKeptError,
    MQError,
    NotFoundError,
    OutboxError,
    OutboxFullError,
    OutboxLockedError,
    PayloadTooLargeError,
    ProducerFencedError,
    ReceiptHandleExpiredError,
    ServerError,
    StepTooLargeError,
    SubscriptionConflictError,
    ThrottledError,
    TransactionEndedError,
    TransportError,
    UnauthorizedError,
    UnsupportedFeatureError,
)
from .large_body import BodyStream, LargeBody, LargeBodyRef
from .message import ConsumeResult, FilterExpression, Message, MessageView, SendReceipt
from .outbox import Refusal, RefusedBatch
from .producer import AsyncProducer, Producer
from .signing import CirrusAuth
from .transaction import (
    AsyncExactlyOnceProducer,
    AsyncExactlyOnceStep,
    ExactlyOnceProducer,
    ExactlyOnceStep,
    OpenTransaction,
    StepResult,
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
    "GroupMetrics",
    "GroupQueue",
    "GroupSummary",
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
    "InvalidLargeBodyError",
    "LargeBodyError",
    "BodyStream",
    "LargeBody",
    "LargeBodyRef",
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
    "TraceEvent",
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
    # lookup by key
    "KeyPage",
    # retries and dead letters
    "DeadLetter",
    "DeadLetterPage",
    "RedriveSummary",
    # transactions
    "OpenTransaction",
    # exactly-once consume -> produce
    "AsyncExactlyOnceProducer",
    "AsyncExactlyOnceStep",
    "ExactlyOnceProducer",
    "ExactlyOnceStep",
    "LeaseMovedOnError",
    "StepResult",
    "StepTooLargeError",
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
