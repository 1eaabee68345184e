"""Core queue benchmark: throughput, AWS calls and list-price cost per message, local stack.

    python tests/benchmarks/core_queue.py [--messages 1000] [--inflight 2000] [--s3-express]
        [--no-piggyback] [--batches 1,10,100,1000] [--profile default,steady]
        [--front-door http-api,function-url]

What it does, all through the front door of one ``LocalStack`` (moto server), one client;
with ``--front-door http-api,function-url`` the batch rounds run once per front door, each on
a stack deployed with that ``FrontDoor`` (the in-flight and idle cases on the first only):

1. For batch sizes 1, 10, 100 and 1,000, after an uncounted warm-up on the topic (48
   one-message sends received and acked: the group's subscription and its state item on each
   queue exist, as under a steady load, which pays those writes once per (group, queue);
   ``--no-warm-up`` counts them in the round), it produces N messages of 1 KiB (``--messages``; at
   least two batches, so 2,000 at batch 1,000), stamped with a producer id + sequence and
   client-made message ids as the SDK's ``Producer`` sends them, then receives
   (``max_messages`` = batch size) and acks them all, twice on two topics: once with a
   standalone ack request after each receive (as before acks rode on receives), once with
   each delivery's acks carried by the next receive (``ack``; the last delivery's by a
   standalone ack, as a consumer that stops sends it), so before and after come from one
   run (``--no-piggyback``: the standalone round only). The same is done with SQS emulated
   by the same moto server (batches capped at SQS's 10), for the throughput comparison.
2. It holds 2,000 unacked leases (``--inflight``) on one (group, queue), invisible 12 h, and
   measures the group-state item's size and the units of one receive (1,999 -> 2,000 leases)
   and one ack there, next to the same with nothing in flight. The first 1,999 leases come
   from 1,999 real receives of one message each.
3. It prices an idle consumer for a month: a server long poll loop (``wait_seconds=20``) and
   the SDK ``PushConsumer``'s client-side adaptive polling (``wait_seconds=0``, the interval
   capped at ``max_poll_interval_s``, read from the SDK), on an idle 8-queue topic.

How the figures are obtained (all from calls counted in this one run, times list prices):

- AWS calls: every call the handlers make is seen through
  ``cirrusmq_broker.storage.clients.observe_calls`` (botocore ``before-parameter-build``), and
  ``botocore.client.BaseClient._make_api_call`` is wrapped in this process to see the answer
  (items read) and whether the call succeeded. Calls are attributed to the request kind
  (produce / receive / ack) of the handler invocation running at the time (one client, so
  one invocation at a time).
- DynamoDB capacity units are computed from item sizes, not taken from
  ``ReturnConsumedCapacity`` (moto does not report it reliably). Item size follows AWS's rules:
  attribute names + values (strings as UTF-8, numbers as base-100 digit pairs + 1 byte, binary
  as bytes, sets as the sum of their elements, lists and maps 3 bytes + 1 byte per element).
  Writes: ceil(size / 1 KB) per item, the larger of the item before and after for a put or
  update (a failed conditional write: the existing item's size, at least 1), twice that inside
  ``TransactWriteItems``; plus the global secondary index writes the change causes (an index
  entry put when it appears or its projected attributes change, a delete when it goes; entry
  size = projected attributes + 100 bytes; billed at the standard rate, also under a
  transaction — an assumption). Reads: ceil(size / 4 KB) per item for GetItem and
  BatchGetItem (an item that does not exist still costs the minimum), ceil(sum of the items'
  sizes / 4 KB) for Query and Scan, halved when eventually consistent. The items written are in
  the request parameters; for updates the item before and after comes from a shadow copy of
  every item this process wrote (update expressions of the form ``SET a = :v`` / ``ADD a :v``
  are applied to it; any other form keeps the old size and is counted as estimated), checked
  at the end against the items stored in moto (the check is printed). Not counted: TTL
  expiry deletes (free) and storage.
- Lambda duration: ``cirrusmq_local.lambda_runtime.FunctionRuntime.invoke`` is wrapped in this
  process; the time inside it (JSON round trip of event and result + handler), less this
  benchmark's own bookkeeping, is split into CPU time (this process's, so it includes the
  local stack's background threads) and waiting. Lambda gives a function CPU in proportion
  to its MemorySize (one vCPU at 1,769 MB), so the CPU time is stretched by 1,769 / MemorySize
  (1.73x at 1,024 MB; a Lambda vCPU taken as fast as one core here) and the waits are kept;
  the sum is billed in 1 ms increments at the MemorySize the local template loader read from
  template.yaml (Globals: 1024 MB). Handlers are imported before the run (no cold start
  counted). moto answers in a few ms where S3 Standard takes far longer, so the profiles'
  tables also show the duration on paper for AWS: the same CPU time, and each call's
  published latency (``AWS_CALL_MS``) in place of moto's. Every total is also printed
  without Lambda duration.

Prices: AWS list prices, us-east-1, as of 2026-12-02 (see ``PRICES_AS_OF``): Lambda arm64
$0.0000133334 per GB-second and $0.20 per million requests; HTTP API $1.00 per million requests;
DynamoDB on-demand $0.625 per million write request units and $0.125 per million read request
units; S3 Standard PUT $0.005 per 1,000, GET $0.0004 per 1,000; SQS standard $0.40 per million
requests, each 64 KB chunk of a payload billed as one request. SQS's best batched cost is
send + receive + delete in batches of 10: 0.3 requests per message, $0.12 per million.

With ``--s3-express`` the local stack is deployed with the template's ``BatchStorage=express``
option (batch objects in its directory bucket, held locally to a directory bucket's rules:
infra/cirrusmq_local/directory_buckets.py), and the cost table also prices the batch objects
at S3 Express One Zone rates: PUT $0.00113 and GET $0.00003 per 1,000 requests plus $0.0032
per GB uploaded and $0.0006 per GB retrieved for the part of each request above 512 KB (so
nothing for batch objects below that), list prices us-east-1 as AWS's S3 FAQ gives them
(read 2026-11-26). Storage is not counted for either class.

The front door is priced from the deployment measured: ``http-api`` ($1.00 per million
requests on top of the Lambda requests), ``function-url`` (no charge of its own: a function
URL is billed as its function's requests and duration, both counted here, the router's
in-process routing inside the measured duration).

Profiles (``--profile``; default: both): the calls counted on a stack deployed with the
profile's ``LeasesOnSummary`` (the batch rounds run once per front door and setting; with
``--leases-on-summary off|on`` once, every profile priced from it), priced as the deployment
would bill them, each with its goals (Lambda duration counted), $ per million messages:

- ``default`` (the template's defaults: on-demand DynamoDB, the template's MemorySize):
  batch 100 at most $0.15, batch 1,000 at most $0.015.
- ``steady`` (``DynamoDbCapacity=provisioned FunctionMemorySize=512 LeasesOnSummary=on``,
  best with ``FrontDoor=function-url``): the message path's tables
  (``PROVISIONED_TABLES``) on provisioned capacity under auto scaling at 70 % target
  utilization ($0.00065 per WCU-hour, $0.00013 per RCU-hour, us-east-1 list prices of
  aws.amazon.com/dynamodb/pricing/provisioned as of 2026-12-02: a unit used costs the
  hour's price / 3,600 / 0.70), the other tables on-demand, the handler time priced at
  512 MB (the waits at half the price, the CPU time stretched 3.46x: the same GB-s as at
  1,024 MB): batch 100 at most $0.10, batch 1,000 at most $0.010.
  Provisioned capacity is paid by the hour whether used or not: the figures hold only for a
  load steady enough for auto scaling to track it (see docs/deploy.md).

Throughput figures come from one run on this machine: compare them as ratios.
"""

from __future__ import annotations

import argparse
import base64
import collections
import inspect
import itertools
import json
import math
import re
import secrets
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
from botocore.client import BaseClient
from botocore.exceptions import ClientError
from cirrusmq.consumer.push import PushConsumer
from cirrusmq.credentials import Credentials
from cirrusmq.signing import CirrusAuth
from cirrusmq.testing import LocalStack
from cirrusmq_api.routing import Route, RouteMatch, Router
from cirrusmq_broker.storage.clients import observe_calls
from cirrusmq_local.lambda_runtime import FunctionRuntime
from ulid import ULID

BATCH_SIZES = (1, 10, 100, 1000)
BODY_BYTES = 1024
BODY = base64.b64encode(b"x" * BODY_BYTES).decode()
INVISIBLE_12H = 12 * 3600

PRICES_AS_OF = "AWS list prices, us-east-1, as of 2026-12-02"
PRICE = {
    "s3_put": 0.005 / 1000,
    "s3_get": 0.0004 / 1000,
    "ddb_write_unit": 0.625 / 1_000_000,  # on-demand write request unit
    "ddb_read_unit": 0.125 / 1_000_000,  # on-demand read request unit
    "api_request": 1.00 / 1_000_000,  # HTTP API
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_s": 0.0000133334,  # arm64
    "sqs_request": 0.40 / 1_000_000,  # standard queue, per 64 KB chunk
}
S3_EXPRESS_PRICE = {
    "s3_put": 0.00113 / 1000,
    "s3_get": 0.00003 / 1000,
    "upload_gb": 0.0032,
    "retrieval_gb": 0.0006,
}
S3_EXPRESS_AS_OF = "S3 Express One Zone list prices, us-east-1, AWS S3 FAQ read 2026-11-26"
S3_EXPRESS_FREE_BYTES = 512 * 1024
"""S3 Express charges upload / retrieval per GB only for the part of a request above 512 KB."""
EXPRESS_PARAMETERS = {"BatchStorage": "express", "ExpressZoneId": "use1-az4"}
"""``--s3-express``: the local stack deployed with the template's directory bucket option."""
GB = 1024**3
SQS_CHUNK_BYTES = 64 * 1024
SQS_BEST_PER_MILLION = 3 / 10 * PRICE["sqs_request"] * 1_000_000  # $0.12


@dataclass(frozen=True)
class Profile:
    """A deployment's prices: the template parameters that change what a call costs."""

    name: str
    parameters: str
    """The template parameters that deploy it (documentation; the calls are counted on a
    stack deployed with ``leases_on_summary``, see ``--leases-on-summary``)."""
    dynamodb: str
    """``on-demand`` (per request unit) or ``provisioned`` (per capacity unit-hour)."""
    memory_mb: int | None
    """Lambda MemorySize the duration is priced at; None: the template's (as measured)."""
    goals: dict[int, float]
    """Batch size -> $ per million messages, Lambda duration counted."""
    leases_on_summary: str = "off"
    """The profile's LeasesOnSummary: its calls are counted on a stack deployed with it."""

    def provisioned(self, label: str) -> bool:
        """Whether a table's (or its index's) units are billed as provisioned capacity."""
        return self.dynamodb == "provisioned" and label.split("/")[0] in PROVISIONED_TABLES


PROVISIONED_TABLES = frozenset(
    ("LogIndexTable", "QueueHeadsTable", "GroupsTable", "ProducersTable", "NoncesTable")
)
"""The tables (and their indexes) template.yaml's ``DynamoDbCapacity=provisioned`` provisions;
the others stay on-demand."""

PROFILES = {
    "default": Profile(
        "default",
        "the template's defaults: DynamoDbCapacity=on-demand",
        "on-demand",
        None,
        {100: 0.15, 1000: 0.015},
    ),
    "steady": Profile(
        "steady",
        "DynamoDbCapacity=provisioned FunctionMemorySize=512 LeasesOnSummary=on",
        "provisioned",
        512,
        {100: 0.10, 1000: 0.010},
        "on",
    ),
}
"""The profiles priced (``--profile``): default, and the steady-load profile."""
FRONT_DOORS = ("http-api", "function-url")
"""The template's ``FrontDoor`` values (``--front-door``)."""
PROVISIONED_UTILIZATION = 0.70
"""Auto scaling's target utilization: capacity is paid for at 1 / 0.70 of what is used."""
PROVISIONED_PRICE = {
    "wcu_hour": 0.00065,  # one write capacity unit for an hour: 3,600 WRU at 100 %
    "rcu_hour": 0.00013,  # one read capacity unit for an hour: 3,600 RRU at 100 %
}
PROVISIONED_WRITE_UNIT = PROVISIONED_PRICE["wcu_hour"] / 3600 / PROVISIONED_UTILIZATION
PROVISIONED_READ_UNIT = PROVISIONED_PRICE["rcu_hour"] / 3600 / PROVISIONED_UTILIZATION
MONTH_S = 30 * 86400
SQS_IDLE_PER_MONTH = MONTH_S / 20 * PRICE["sqs_request"]  # 129,600 long polls

ROUTE_KINDS = {
    "POST /v1/topics/{topic}/messages": "produce",
    "POST /v1/groups/{group}/receive": "receive",
    "POST /v1/groups/{group}/ack": "ack",
}
"""A receive that carries acks counts as a receive (its acks' calls included)."""
KIND_ROUTER = Router((Route(*key.split(" ", 1)), kind) for key, kind in ROUTE_KINDS.items())


def request_kind(event: dict[str, Any]) -> str:
    """``produce`` / ``receive`` / ``ack`` / ``other``, by the route the request matches
    (a function URL's event has no route key of its own, an HTTP API's the same match)."""
    http = (event.get("requestContext") or {}).get("http") or {}
    found = KIND_ROUTER.match(str(http.get("method") or ""), str(event.get("rawPath") or "/"))
    return found.target if isinstance(found, RouteMatch) else "other"


KINDS = ("produce", "receive", "ack", "notify")
INDEX_ENTRY_OVERHEAD = 100
"""Bytes AWS adds to a global secondary index entry's projected attributes."""


# ============================================================== DynamoDB item sizes
CREDENTIALS = Credentials("local-admin", secrets.token_urlsafe(30))
"""The local stack's bootstrap admin key (given to it at start)."""
SIGNED = CirrusAuth(CREDENTIALS)
"""Signs every request (the API refuses unsigned ones)."""


def number_size(text: str) -> int:
    """Bytes of a DynamoDB number: its base-100 digit pairs, plus one byte."""
    value = Decimal(text)
    if value == 0:
        return 2
    _, digits, exponent = value.normalize().as_tuple()
    assert isinstance(exponent, int)
    count = len(digits) + (exponent % 2)  # align the last digit to an even power of ten
    return (count + 1) // 2 + 1


def value_size(value: dict[str, Any]) -> int:
    """Bytes of one attribute value (AWS's item size rules)."""
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return number_size(v)
    if kind == "B":
        return len(v) if isinstance(v, bytes | bytearray) else len(base64.b64decode(v))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(map(number_size, v))
    if kind == "BS":
        return sum(len(b) for b in v)
    if kind == "L":
        return 3 + sum(1 + value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(x) for k, x in v.items())
    raise ValueError(f"unknown attribute type {kind}")


def item_size(item: dict[str, Any] | None) -> int:
    """Bytes of an item: attribute names plus values (0 for no item)."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(v) for name, v in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int) -> int:
    return max(1, math.ceil(size / 4096))


_CLAUSE = re.compile(r"\b(SET|ADD|REMOVE|DELETE)\b", re.IGNORECASE)


def apply_update(
    old: dict[str, Any] | None,
    key: dict[str, Any],
    expression: str,
    names: dict[str, str],
    values: dict[str, Any],
) -> tuple[dict[str, Any], bool]:
    """The item after ``expression``; False when a part was not understood (left out)."""
    item = dict(old) if old else dict(key)
    exact = True
    parts = _CLAUSE.split(expression)
    for verb, body in zip(parts[1::2], parts[2::2], strict=True):
        for action in (a.strip() for a in body.split(",")):
            verb = verb.upper()
            pattern = r"(#?\w+)\s*=\s*(:\w+)" if verb == "SET" else r"(#?\w+)\s*(:\w+)?"
            match = re.fullmatch(pattern, action)
            if not match:
                exact = False
                continue
            name = names.get(match[1], match[1])
            operand = values.get(match[2]) if match[2] else None
            if verb == "SET" and operand is not None:
                item[name] = operand
            elif verb == "REMOVE":
                item.pop(name, None)
            elif verb in ("ADD", "DELETE") and operand is not None:
                item[name] = _add(item.get(name), operand, remove=verb == "DELETE")
            else:
                exact = False
    return {k: v for k, v in item.items() if v is not None}, exact


def _add(current: dict[str, Any] | None, operand: dict[str, Any], *, remove: bool) -> Any:
    ((kind, value),) = operand.items()
    if kind == "N":
        base = Decimal(current["N"]) if current else Decimal(0)
        return {"N": str(base + Decimal(value))}
    existing = list(current[kind]) if current else []
    norm = (lambda x: Decimal(x)) if kind == "NS" else (lambda x: x)
    if remove:
        gone = {norm(x) for x in value}
        kept = [x for x in existing if norm(x) not in gone]
        return {kind: kept} if kept else None
    seen = {norm(x) for x in existing}
    for x in value:
        if norm(x) not in seen:
            seen.add(norm(x))
            existing.append(x)
    return {kind: existing}


# ============================================================== tables and their indexes
@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    projection: str
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    label: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()

    def key_of(self, item: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(_norm(item[k]) for k in self.keys)

    def projected(self, item: dict[str, Any] | None, index: Index) -> dict[str, Any] | None:
        if not item or any(k not in item for k in index.keys):
            return None
        if index.projection == "ALL":
            return item
        kept = set(self.keys) | set(index.keys) | set(index.include)
        return {k: v for k, v in item.items() if k in kept}


def _norm(value: dict[str, Any]) -> tuple[str, Any]:
    ((kind, v),) = value.items()
    return (kind, str(Decimal(v).normalize()) if kind == "N" else v)


def describe_tables(ddb: Any, resources: dict[str, str]) -> dict[str, Table]:
    """Physical table name → its key schema and global secondary indexes (from moto)."""
    tables = {}
    for logical, physical in resources.items():
        try:
            described = ddb.describe_table(TableName=physical)["Table"]
        except ClientError:
            continue  # a bucket
        indexes = tuple(
            Index(
                gsi["IndexName"],
                tuple(k["AttributeName"] for k in gsi["KeySchema"]),
                gsi["Projection"]["ProjectionType"],
                tuple(gsi["Projection"].get("NonKeyAttributes", ())),
            )
            for gsi in described.get("GlobalSecondaryIndexes", ())
        )
        keys = tuple(k["AttributeName"] for k in described["KeySchema"])
        tables[physical] = Table(logical, keys, indexes)
    return tables


# ============================================================== usage
FULL_VCPU_MB = 1769
"""Lambda gives a function CPU in proportion to its MemorySize: one full vCPU at 1,769 MB
(docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html)."""


AWS_CALL_MS = {
    "S3 PUT": (10, 100),
    "S3 GET": (10, 100),
    "DynamoDB read": (1, 10),
    "DynamoDB write": (1, 10),
}
"""An AWS call's latency in AWS (ms, low and high), for the on-paper duration: S3 Standard,
requests under 512 KB: "median latencies are often in the tens of milliseconds"
(docs.aws.amazon.com/whitepapers/latest/s3-optimizing-performance-best-practices/
timeouts-and-retries-for-latency-sensitive-applications.html), DynamoDB "single-digit
millisecond" (aws.amazon.com/dynamodb), read 2026-12-02. Calls are taken one after another
(a bound from above)."""
AWS_EXPRESS_CALL_MS = (1, 10)
"""S3 Express One Zone: "consistent single-digit millisecond" (its product page)."""
AWS_OTHER_CALL_MS = (1, 10)
"""Any other call (KMS, an asynchronous Lambda invoke, other DynamoDB operations): taken as
DynamoDB's."""


def background_cpu() -> float:
    """CPU seconds the local stack's own threads (``cirrusmq-*``: the stream poller and the
    runs it feeds, the metric forwarder) have used: not a request's."""
    total = 0.0
    for thread in threading.enumerate():
        if thread.name.startswith("cirrusmq-") and thread.ident is not None:
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except (OSError, ProcessLookupError):  # ended meanwhile
                continue
    return total


@dataclass(frozen=True)
class Invocation:
    """One handler invocation here: wall time, the CPU time this process spent in it (its
    threads and the local stack's background threads together: a bound from above), and the
    AWS calls it made."""

    wall_s: float
    cpu_s: float
    memory_mb: int
    calls: tuple[tuple[str, int], ...] = ()
    streamed: bool = False
    """Fed by a stream (the notifier): no front door request, and its function's own
    MemorySize (256 MB), which a profile's ``FunctionMemorySize`` does not change."""

    def billed_gb_s(self, memory_mb: int | None = None) -> float:
        """GB-s Lambda would bill at ``memory_mb`` (None: the function's own): the time spent
        waiting as measured here, plus the CPU time stretched by the function's CPU share
        (1,024 MB: 0.58 of a vCPU, so 1.73x), in 1 ms increments. Assumes a Lambda vCPU
        runs this Python as fast as one core of this machine."""
        return self._billed(self.wall_s - self.cpu_s, memory_mb)

    def aws_gb_s(self, memory_mb: int | None, bound: int, *, s3_express: bool = False) -> float:
        """GB-s on paper for AWS: the same CPU time, and waits of :data:`AWS_CALL_MS`
        (``bound`` 0: the low figures, 1: the high ones) instead of moto's."""
        waiting = 0.0
        for kind, count in self.calls:
            if kind.startswith("S3"):
                latency = AWS_EXPRESS_CALL_MS if s3_express else AWS_CALL_MS["S3 GET"]
            else:
                latency = AWS_CALL_MS.get(kind, AWS_OTHER_CALL_MS)
            waiting += count * latency[bound] / 1000
        return self._billed(waiting, memory_mb)

    def _billed(self, waiting: float, memory_mb: int | None) -> float:
        memory = self.memory_mb if self.streamed else memory_mb or self.memory_mb
        running = self.cpu_s * max(1.0, FULL_VCPU_MB / memory)
        billed_ms = math.ceil(round(1000 * (waiting + running), 6))  # 1 ms increments
        return billed_ms / 1000 * memory / 1024


@dataclass
class Usage:
    """What one kind of request cost: calls, DynamoDB units by table, Lambda time."""

    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    read_units: collections.Counter[str] = field(default_factory=collections.Counter)
    write_units: collections.Counter[str] = field(default_factory=collections.Counter)
    requests: int = 0
    invocations: list[Invocation] = field(default_factory=list)
    estimated_writes: int = 0
    failed_writes: int = 0
    express_upload_bytes: int = 0
    """Bytes of PutObject bodies beyond the first 512 KB of each (S3 Express's upload charge)."""
    express_retrieval_bytes: int = 0
    """Bytes of GetObject answers beyond the first 512 KB of each (its retrieval charge)."""

    def merge(self, other: Usage) -> Usage:
        self.calls.update(other.calls)
        self.read_units.update(other.read_units)
        self.write_units.update(other.write_units)
        self.requests += other.requests
        self.invocations += other.invocations
        self.estimated_writes += other.estimated_writes
        self.failed_writes += other.failed_writes
        self.express_upload_bytes += other.express_upload_bytes
        self.express_retrieval_bytes += other.express_retrieval_bytes
        return self

    @property
    def front_door_requests(self) -> int:
        """Requests through the front door: every invocation but the stream-fed ones."""
        return self.requests - sum(i.streamed for i in self.invocations)

    @property
    def handler_ms(self) -> list[float]:
        """Each invocation's wall time here, in ms."""
        return [1000 * invocation.wall_s for invocation in self.invocations]

    def billed_gb_s(self, memory_mb: int | None = None) -> float:
        """Lambda GB-s billed for the invocations at ``memory_mb`` (None: each function's
        own MemorySize)."""
        return sum(invocation.billed_gb_s(memory_mb) for invocation in self.invocations)

    def aws_gb_s(self, memory_mb: int | None, bound: int, *, s3_express: bool = False) -> float:
        """Lambda GB-s on paper for AWS (see :meth:`Invocation.aws_gb_s`)."""
        return sum(i.aws_gb_s(memory_mb, bound, s3_express=s3_express) for i in self.invocations)

    @property
    def rru(self) -> float:
        return sum(self.read_units.values())

    @property
    def wru(self) -> float:
        return sum(self.write_units.values())

    def cost(
        self,
        *,
        s3_express: bool = False,
        profile: Profile = PROFILES["default"],
        front_door: str = "http-api",
    ) -> dict[str, float]:
        """Dollars by component (batch objects in S3 Standard, or S3 Express One Zone), at
        the prices of ``profile`` (DynamoDB capacity mode, Lambda memory), behind the
        ``front_door`` the calls were measured through."""
        if s3_express:
            put = self.calls["S3 PUT"] * S3_EXPRESS_PRICE["s3_put"]
            put += self.express_upload_bytes / GB * S3_EXPRESS_PRICE["upload_gb"]
            get = self.calls["S3 GET"] * S3_EXPRESS_PRICE["s3_get"]
            get += self.express_retrieval_bytes / GB * S3_EXPRESS_PRICE["retrieval_gb"]
        else:
            put = self.calls["S3 PUT"] * PRICE["s3_put"]
            get = self.calls["S3 GET"] * PRICE["s3_get"]
        writes = reads = 0.0
        for label, units in self.write_units.items():
            provisioned = profile.provisioned(label)
            writes += units * (PROVISIONED_WRITE_UNIT if provisioned else PRICE["ddb_write_unit"])
        for label, units in self.read_units.items():
            provisioned = profile.provisioned(label)
            reads += units * (PROVISIONED_READ_UNIT if provisioned else PRICE["ddb_read_unit"])
        door = PRICE["api_request"] if front_door == "http-api" else 0.0
        gb_s = self.billed_gb_s(profile.memory_mb)
        return {
            "S3 PUT": put,
            "S3 GET": get,
            "DDB write": writes,
            "DDB read": reads,
            "HTTP API": self.front_door_requests * door,
            "Lambda req": self.requests * PRICE["lambda_request"],
            "Lambda GB-s": gb_s * PRICE["lambda_gb_s"],
        }


def merged(usages: Iterator[Usage] | list[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total.merge(usage)
    return total


class Meter:
    """Counts the handlers' AWS calls, DynamoDB units and Lambda time by request kind."""

    def __init__(self, tables: dict[str, Table]) -> None:
        self.tables = tables
        self.shadow: dict[tuple[str, tuple[Any, ...]], dict[str, Any]] = {}
        self._usage: dict[str, Usage] = collections.defaultdict(Usage)
        self._lock = threading.RLock()
        self._local = threading.local()
        self.kind = "other"
        """The kind of the invocation running now (one client: one at a time)."""

    def take(self) -> dict[str, Usage]:
        """Usage since the last take, by request kind."""
        with self._lock:
            usage, self._usage = dict(self._usage), collections.defaultdict(Usage)
        return usage

    def _now(self) -> Usage:
        # a stream-fed run (the notifier) has its thread's own kind; a client request's
        # calls also come from its worker threads (the produce's uploads): the shared kind
        return self._usage[getattr(self._local, "kind", None) or self.kind]

    # ---------------------------------------------------------------- hooks
    def observe(self, service: str, operation: str, params: dict[str, Any]) -> None:
        """observe_calls observer: runs before every call of a handler's client."""
        if service == "s3":
            kind = {"PutObject": "S3 PUT", "GetObject": "S3 GET"}.get(operation, "S3 other")
            if operation == "PutObject":
                body = params.get("Body", b"")
                with self._lock:
                    size = len(body) if isinstance(body, bytes) else 0
                    self._now().express_upload_bytes += max(0, size - S3_EXPRESS_FREE_BYTES)
        elif service == "dynamodb":
            self._local.pending = (operation, params)
            kind = "DynamoDB"  # read / write decided when the answer is in
        else:
            kind = f"{service} {operation}"
        if kind != "DynamoDB":
            with self._lock:
                self._now().calls[kind] += 1

    def install(self) -> Callable[[], None]:
        """Wrap botocore's call and the local Lambda runtime; returns the undo."""
        meter = self
        original_call = BaseClient._make_api_call
        original_invoke = FunctionRuntime.invoke

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            meter._local.pending = None
            try:
                answer = original_call(client, operation, params)
            except Exception as exc:
                meter._answered(None, exc)
                raise
            meter._answered(answer, None)
            if operation == "GetObject" and client.meta.service_model.service_name == "s3":
                with meter._lock:
                    size = int(answer.get("ContentLength") or 0)
                    meter._now().express_retrieval_bytes += max(0, size - S3_EXPRESS_FREE_BYTES)
            return answer

        def invoke(runtime: FunctionRuntime, event: Any) -> Any:
            streamed = isinstance(event, dict) and "Records" in event
            kind = "notify" if streamed else request_kind(event)
            if not streamed:
                meter.kind = kind
            meter._local.kind, meter._local.overhead, meter._local.overhead_cpu = kind, 0.0, 0.0
            with meter._lock:
                calls_before = collections.Counter(meter._usage[kind].calls)
            started = time.perf_counter()
            cpu_started = time.thread_time() if streamed else time.process_time()
            background_started = 0.0 if streamed else background_cpu()
            try:
                return original_invoke(runtime, event)
            finally:
                wall = time.perf_counter() - started - meter._local.overhead
                if streamed:  # the poller's thread: its own CPU time
                    cpu = time.thread_time() - cpu_started
                else:  # the process's, less the local stack's own threads' meanwhile
                    cpu = time.process_time() - cpu_started
                    cpu -= background_cpu() - background_started
                cpu = max(0.0, cpu - meter._local.overhead_cpu)
                with meter._lock:
                    usage = meter._usage[kind]
                    usage.requests += 1
                    calls = tuple(sorted((usage.calls - calls_before).items()))
                    memory = runtime.function.memory_size
                    usage.invocations.append(
                        Invocation(wall, cpu, memory, calls, streamed=streamed)
                    )
                meter._local.kind = None
                if not streamed:
                    meter.kind = "other"

        remove = observe_calls(self.observe)
        BaseClient._make_api_call = make_api_call  # type: ignore[method-assign]
        FunctionRuntime.invoke = invoke  # type: ignore[method-assign]

        def undo() -> None:
            remove()
            BaseClient._make_api_call = original_call  # type: ignore[method-assign]
            FunctionRuntime.invoke = original_invoke  # type: ignore[method-assign]

        return undo

    def _answered(self, answer: dict[str, Any] | None, error: Exception | None) -> None:
        pending = getattr(self._local, "pending", None)
        self._local.pending = None
        if pending is None:
            return  # not a handler's DynamoDB call
        started, cpu_started = time.perf_counter(), time.thread_time()
        operation, params = pending
        with self._lock:
            try:
                self._dynamodb(operation, params, answer, error)
            finally:
                spent = time.perf_counter() - started
                self._local.overhead = getattr(self._local, "overhead", 0.0) + spent
                spent_cpu = time.thread_time() - cpu_started
                self._local.overhead_cpu = getattr(self._local, "overhead_cpu", 0.0) + spent_cpu

    # ---------------------------------------------------------------- DynamoDB units
    def _dynamodb(
        self,
        operation: str,
        params: dict[str, Any],
        answer: dict[str, Any] | None,
        error: Exception | None,
    ) -> None:
        usage = self._now()
        if operation in ("GetItem", "BatchGetItem", "Query", "Scan"):
            usage.calls["DynamoDB read"] += 1
            if answer is not None:
                self._read(usage, operation, params, answer)
        elif operation in (
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "TransactWriteItems",
            "BatchWriteItem",
        ):
            usage.calls["DynamoDB write"] += 1
            ok = error is None
            if operation == "TransactWriteItems":
                writes = [next(iter(t.items())) for t in params["TransactItems"]]
                changes = [self._change(op, p) for op, p in writes]
                for table, _key, old, new, exact in changes:
                    self._bill(usage, table, old, new, ok=ok, exact=exact, factor=2)
                if ok:
                    for table, key, _, new, _ in changes:
                        self._store(table, key, new)
            elif operation == "BatchWriteItem":
                for name, requests in params["RequestItems"].items():
                    for request in requests:
                        op, p = next(iter(request.items()))
                        op = {"PutRequest": "Put", "DeleteRequest": "Delete"}[op]
                        table, key, old, new, exact = self._change(op, {"TableName": name, **p})
                        self._bill(usage, table, old, new, ok=True, exact=exact, factor=1)
                        self._store(table, key, new)
            else:
                op = operation.removesuffix("Item")
                table, key, old, new, exact = self._change(op, params)
                self._bill(usage, table, old, new, ok=ok, exact=exact, factor=1)
                if ok:
                    self._store(table, key, new)
        else:
            usage.calls[f"DynamoDB {operation}"] += 1

    def _change(
        self, op: str, p: dict[str, Any]
    ) -> tuple[Table, tuple[Any, ...], dict[str, Any] | None, dict[str, Any] | None, bool]:
        """(table, key, item before, item after, sized exactly) of one write."""
        table = self.tables[p["TableName"]]
        key_item = p["Item"] if op == "Put" else p["Key"]
        key = table.key_of(key_item)
        old = self.shadow.get((p["TableName"], key))
        if op == "Put":
            return table, key, old, p["Item"], True
        if op == "Delete":
            return table, key, old, None, True
        if op == "Update":
            new, exact = apply_update(
                old,
                p["Key"],
                p["UpdateExpression"],
                p.get("ExpressionAttributeNames", {}),
                p.get("ExpressionAttributeValues", {}),
            )
            return table, key, old, new, exact
        return table, key, old, old, True  # ConditionCheck: billed as a write of the item

    def _store(self, table: Table, key: tuple[Any, ...], new: dict[str, Any] | None) -> None:
        physical = next(name for name, t in self.tables.items() if t is table)
        if new is None:
            self.shadow.pop((physical, key), None)
        else:
            self.shadow[(physical, key)] = new

    def _bill(
        self,
        usage: Usage,
        table: Table,
        old: dict[str, Any] | None,
        new: dict[str, Any] | None,
        *,
        ok: bool,
        exact: bool,
        factor: int,
    ) -> None:
        if not ok:  # a failed condition costs the existing item's size (at least 1 unit)
            usage.write_units[table.label] += factor * write_units(item_size(old))
            usage.failed_writes += 1
            return
        usage.write_units[table.label] += factor * write_units(max(item_size(old), item_size(new)))
        usage.estimated_writes += not exact
        for index in table.indexes:
            before, after = table.projected(old, index), table.projected(new, index)
            if before == after:
                continue
            same_key = (
                before is not None
                and after is not None
                and all(before[k] == after[k] for k in index.keys)
            )
            entries = [after] if same_key else [e for e in (before, after) if e is not None]
            label = f"{table.label}/{index.name}"
            for entry in entries:
                usage.write_units[label] += write_units(item_size(entry) + INDEX_ENTRY_OVERHEAD)

    def _read(
        self, usage: Usage, operation: str, params: dict[str, Any], answer: dict[str, Any]
    ) -> None:
        if operation == "GetItem":
            table = self.tables[params["TableName"]]
            half = not params.get("ConsistentRead", False)
            units = read_units(item_size(answer.get("Item")))
            usage.read_units[table.label] += units / 2 if half else units
        elif operation == "BatchGetItem":
            unprocessed = answer.get("UnprocessedKeys") or {}
            for name, request in params["RequestItems"].items():
                table = self.tables[name]
                found = {table.key_of(i): i for i in answer.get("Responses", {}).get(name, [])}
                skipped = {table.key_of(k) for k in unprocessed.get(name, {}).get("Keys", [])}
                units = sum(
                    read_units(item_size(found.get(table.key_of(k))))
                    for k in request["Keys"]
                    if table.key_of(k) not in skipped
                )
                half = not request.get("ConsistentRead", False)
                usage.read_units[table.label] += units / 2 if half else units
        else:  # Query, Scan: the items' sizes summed, then rounded up to 4 KB
            name = params["TableName"]
            table = self.tables[name]
            index = params.get("IndexName")
            sizes = []
            for item in answer.get("Items", []):
                full = None
                if index is None and all(k in item for k in table.keys):
                    full = self.shadow.get((name, table.key_of(item)))
                sizes.append(item_size(full or item))
            units = read_units(sum(sizes))
            half = index is not None or not params.get("ConsistentRead", False)
            label = f"{table.label}/{index}" if index else table.label
            usage.read_units[label] += units / 2 if half else units

    # ---------------------------------------------------------------- check
    def check_against(self, ddb: Any) -> tuple[int, int, int]:
        """(items compared, items whose size differs, largest difference in bytes) between
        the shadow copies and the items stored in moto."""
        compared = differing = largest = 0
        for name, table in self.tables.items():
            for page in ddb.get_paginator("scan").paginate(TableName=name):
                for item in page["Items"]:
                    shadow = self.shadow.get((name, table.key_of(item)))
                    if shadow is None:
                        continue
                    compared += 1
                    difference = abs(item_size(item) - item_size(shadow))
                    differing += difference > 0
                    largest = max(largest, difference)
        return compared, differing, largest


# ============================================================== the client side
@dataclass
class Phase:
    messages: int
    seconds: float
    latencies: list[float]
    usage: dict[str, Usage]

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


class Client:
    """The benchmark's HTTP client: stamped sends like the SDK's producer."""

    def __init__(self, api: httpx.Client) -> None:
        self.api = api
        self.producer_id = f"p-{uuid.uuid4().hex}"
        self._sequence = itertools.count()

    def create_topic(self, name: str, queues: int) -> None:
        self.api.post("/v1/topics", json={"name": name, "queues": queues}).raise_for_status()

    def send(self, topic: str, count: int) -> None:
        now = int(time.time() * 1000)
        messages = [
            {"body": BODY, "message_id": str(ULID()), "born_timestamp": now} for _ in range(count)
        ]
        r = self.api.post(
            f"/v1/topics/{topic}/messages",
            json={
                "producer_id": self.producer_id,
                "sequence": next(self._sequence),
                "messages": messages,
            },
        )
        r.raise_for_status()

    def receive(
        self,
        group: str,
        topic: str,
        count: int,
        *,
        wait: float = 0,
        invisible: int = 60,
        ack: list[str] | None = None,
    ) -> list[str]:
        """The handles received; ``ack``: handles the receive acks first (all must be acked)."""
        body: dict[str, Any] = {
            "topic": topic,
            "max_messages": count,
            "wait_seconds": wait,
            "invisible_seconds": invisible,
        }
        if ack:
            body["ack"] = ack
        r = self.api.post(f"/v1/groups/{group}/receive", json=body)
        r.raise_for_status()
        if ack:
            _check_acked(ack, r.json()["acks"])
        return [m["receipt_handle"] for m in r.json()["messages"]]

    def ack(self, group: str, handles: list[str]) -> None:
        r = self.api.post(f"/v1/groups/{group}/ack", json={"receipt_handles": handles})
        r.raise_for_status()
        _check_acked(handles, r.json())


def _check_acked(handles: list[str], answer: dict[str, Any]) -> None:
    if answer["acked"] != len(handles):
        raise RuntimeError(f"acked {answer['acked']} of {len(handles)}: {answer['results'][:3]}")


def timed(meter: Meter, work: Callable[[list[float]], int]) -> Phase:
    meter.take()
    latencies: list[float] = []
    started = time.perf_counter()
    messages = work(latencies)
    seconds = time.perf_counter() - started
    return Phase(messages, seconds, latencies, meter.take())


def produce(client: Client, topic: str, total: int, batch: int) -> Callable[[list[float]], int]:
    def work(latencies: list[float]) -> int:
        sent = 0
        while sent < total:
            size = min(batch, total - sent)
            t = time.perf_counter()
            client.send(topic, size)
            latencies.append(time.perf_counter() - t)
            sent += size
        return sent

    return work


def consume(
    client: Client, topic: str, total: int, batch: int, *, piggyback: bool
) -> Callable[[list[float]], int]:
    """Receive ``total`` messages ``batch`` at a time and ack them all: each delivery's acks
    in a request of their own, or (``piggyback``) carried by the next receive, the last
    delivery's in a standalone ack (a consumer that stops)."""

    def work(latencies: list[float]) -> int:
        got, pending = 0, []
        while got < total:
            t = time.perf_counter()
            handles = client.receive("bench", topic, batch, wait=1, ack=pending)
            pending = []
            if not handles:
                break
            if piggyback:
                pending = handles
            else:
                client.ack("bench", handles)
            latencies.append(time.perf_counter() - t)
            got += len(handles)
        if pending:
            client.ack("bench", pending)
        return got

    return work


def sqs_round(sqs: Any, total: int, batch: int) -> tuple[float, float]:
    """(send msg/s, receive+delete msg/s) against moto's SQS, batches capped at 10.

    One round per capped batch size (1, 10) of ``--messages`` messages: moto's SQS slows
    down with the queue's length, and larger batches would repeat the batch-10 round.
    """
    url = sqs.create_queue(QueueName=f"bench-{batch}-{time.time_ns()}")["QueueUrl"]
    batch, body = min(batch, 10), "x" * BODY_BYTES
    started, sent = time.perf_counter(), 0
    while sent < total:
        size = min(batch, total - sent)
        if size == 1:
            sqs.send_message(QueueUrl=url, MessageBody=body)
        else:
            sqs.send_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": body} for i in range(size)]
            )
        sent += size
    send_rate = sent / (time.perf_counter() - started)
    started, got = time.perf_counter(), 0
    while got < total:
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=batch, WaitTimeSeconds=1
        ).get("Messages", [])
        if not messages:
            break
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )
        got += len(messages)
    return send_rate, got / (time.perf_counter() - started)


def sqs_cost_per_million(batch: int) -> float:
    """Send + receive + delete in batches of min(batch, 10); payloads in 64 KB chunks."""
    size = min(batch, 10)
    chunks = math.ceil(size * BODY_BYTES / SQS_CHUNK_BYTES)
    return (2 * chunks + 1) / size * PRICE["sqs_request"] * 1_000_000


# ============================================================== scenarios
@dataclass
class BatchRun:
    batch: int
    produce: Phase
    consume: Phase
    """Receive + ack with acks on receives (standalone ones with ``--no-piggyback``)."""
    sqs_send: float
    sqs_recv: float
    standalone: Phase | None = None
    """Receive + ack with a standalone ack after each receive (before acks rode on receives)."""

    @property
    def messages(self) -> int:
        return self.produce.messages

    def usage(self, kind: str) -> Usage:
        if kind == "notify":  # the stream poller runs it when it finds the heads moved
            return merged(p.usage.get(kind, Usage()) for p in (self.produce, self.consume))
        phase = self.produce if kind == "produce" else self.consume
        return phase.usage.get(kind, Usage())

    def total(self) -> Usage:
        return merged([*self.produce.usage.values(), *self.consume.usage.values()])

    def total_standalone(self) -> Usage | None:
        if self.standalone is None:
            return None
        return merged([*self.produce.usage.values(), *self.standalone.usage.values()])


WARM_UP_SENDS = 48
"""One-message sends before a measured round: stamped sends land on a queue chosen by a hash
of the stamp, and 48 of them miss one of 8 queues with a probability of about 1 %."""


def warm_up(client: Client, meter: Meter, topic: str) -> None:
    """Subscribe the group and create its state item on each queue, uncounted: a steady
    load pays these writes once per (group, queue), not per message."""
    for _ in range(WARM_UP_SENDS):
        client.send(topic, 1)
    got, pending = 0, []
    while got < WARM_UP_SENDS:
        handles = client.receive("bench", topic, WARM_UP_SENDS, wait=1, ack=pending)
        if not handles:
            raise RuntimeError(f"warm-up of {topic}: received {got} of {WARM_UP_SENDS}")
        got, pending = got + len(handles), handles
    client.ack("bench", pending)
    meter.take()


def run_batches(
    client: Client,
    meter: Meter,
    sqs: Any,
    messages: int,
    batches: tuple[int, ...] = BATCH_SIZES,
    *,
    piggyback: bool = True,
    warm: bool = True,
    sqs_rates: dict[int, tuple[float, float]] | None = None,
) -> list[BatchRun]:
    """Each batch size's rounds; ``sqs_rates`` (SQS's rates by batch, capped at 10) is
    filled by the first round that needs one and reused by the others, across calls."""
    runs = []
    sqs_rates = {} if sqs_rates is None else sqs_rates
    for batch in batches:
        topic, total = f"bench-{batch}", max(messages, 2 * batch)
        client.create_topic(topic, 8)
        if warm:
            warm_up(client, meter, topic)
        p = timed(meter, produce(client, topic, total, batch))
        standalone = None
        if piggyback:  # the same again, acking each delivery in a request of its own
            before = f"bench-{batch}-standalone"
            client.create_topic(before, 8)
            if warm:
                warm_up(client, meter, before)
            timed(meter, produce(client, before, total, batch))
            standalone = timed(meter, consume(client, before, total, batch, piggyback=False))
            if standalone.messages != total:
                raise RuntimeError(f"batch {batch}: received {standalone.messages} of {total}")
        c = timed(meter, consume(client, topic, total, batch, piggyback=piggyback))
        if c.messages != total:
            raise RuntimeError(f"batch {batch}: received {c.messages} of {total}")
        started = time.perf_counter()
        if min(batch, 10) not in sqs_rates:
            sqs_rates[min(batch, 10)] = sqs_round(sqs, messages, batch)
        sqs_send, sqs_recv = sqs_rates[min(batch, 10)]
        runs.append(BatchRun(batch, p, c, sqs_send, sqs_recv, standalone))
        print(
            f"batch {batch:>4}: {total} messages, produce {p.seconds:.0f} s, receive+ack"
            f" {c.seconds:.0f} s, SQS {time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    return runs


@dataclass
class InflightCase:
    inflight: int
    state_bytes: int
    shadow_bytes: int
    receive: Usage
    ack: Usage
    note: str = ""


def measured(meter: Meter, work: Callable[[], Any]) -> tuple[Usage, Any]:
    meter.take()
    result = work()
    return merged(meter.take().values()), result


def state_item_size(stack: LocalStack, meter: Meter, group: str, topic: str) -> tuple[int, int]:
    """(bytes of the stored (group, queue 0) state item in moto, bytes of the shadow copy)."""
    ddb = stack.boto3_client("dynamodb")
    table = stack.resources["GroupsTable"]
    key = {"group_name": {"S": group}, "stream": {"S": f"{topic}#0"}}
    item = ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")
    shadow = meter.shadow.get((table, meter.tables[table].key_of(key)))
    return item_size(item), item_size(shadow)


def run_inflight(
    stack: LocalStack, client: Client, meter: Meter, held: int
) -> tuple[list[InflightCase], Usage | None, float]:
    """Units of one receive and one ack with 0 and with ``held`` messages in flight on one
    (group, queue); also what a receive costs once the queue's lease limit is reached.

    The first ``held - 1`` leases come from ``held - 1`` receives of one message; the last
    one is the measured receive (``held - 1`` → ``held`` leases), then one ack there.
    """
    topic, group = "bench-inflight", "holder"
    client.create_topic(topic, 1)
    left = held + 10  # enough for the measured receives after the held ones
    while left:
        client.send(topic, min(1000, left))
        left -= min(1000, left)
    client.ack(group, client.receive(group, topic, 1))  # the state item and subscription exist
    cases = []

    size, shadow = state_item_size(stack, meter, group, topic)
    receive, handles = measured(meter, lambda: client.receive(group, topic, 1))
    ack, _ = measured(meter, lambda: client.ack(group, handles))
    cases.append(InflightCase(0, size, shadow, receive, ack))

    print(f"in flight: holding {held - 1} leases (made by receives)", file=sys.stderr)
    started = time.perf_counter()
    for i in range(held - 1):
        if not client.receive(group, topic, 1, invisible=INVISIBLE_12H):
            raise RuntimeError(f"receive {i} of the held leases brought nothing")
    setup_s = time.perf_counter() - started
    receive, kept = measured(
        meter, lambda: client.receive(group, topic, 1, invisible=INVISIBLE_12H)
    )
    size, shadow = state_item_size(stack, meter, group, topic)
    at_limit, nothing = measured(meter, lambda: client.receive(group, topic, 1))
    if nothing:  # below the lease limit: it took one more; give it back
        client.ack(group, nothing)
        at_limit = None
    ack, _ = measured(meter, lambda: client.ack(group, kept))
    note = f"receive: {held - 1} -> {held} leases (the {held - 1} made by receives); ack at {held}"
    cases.append(InflightCase(held, size, shadow, receive, ack, note))
    return cases, at_limit, setup_s


@dataclass
class IdleCosts:
    long_poll: Usage
    long_poll_s: float
    short_polls: Usage
    short_poll_count: int
    short_poll_wall_ms: float
    max_interval_s: float


def run_idle(client: Client, meter: Meter, short_polls: int = 10) -> IdleCosts:
    topic = "bench-idle"
    client.create_topic(topic, 8)
    for group in ("idle-long", "idle-push"):
        client.receive(group, topic, 32)  # subscribes the group (a write, once)
    print("idle: one 20 s long poll", file=sys.stderr)
    started = time.perf_counter()
    long_poll, got = measured(meter, lambda: client.receive("idle-long", topic, 32, wait=20))
    long_poll_s = time.perf_counter() - started
    if got:
        raise RuntimeError("the idle topic delivered a message")
    walls = []

    def polls() -> None:
        for _ in range(short_polls):
            t = time.perf_counter()
            if client.receive("idle-push", topic, 32, wait=0):
                raise RuntimeError("the idle topic delivered a message")
            walls.append(time.perf_counter() - t)

    short, _ = measured(meter, polls)
    default = inspect.signature(PushConsumer.__init__).parameters["max_poll_interval_s"].default
    return IdleCosts(
        long_poll,
        long_poll_s,
        short,
        short_polls,
        1000 * statistics.median(walls),
        float(default),
    )


# ============================================================== printing
def per_1000(value: float, messages: int) -> float:
    return 1000 * value / messages


def print_throughput(runs: list[BatchRun], messages: int) -> None:
    print(
        f"\nCirrusMQ core queue benchmark — {messages} messages of {BODY_BYTES} B per batch"
        f" size (batch 1000: {max(messages, 2000)}), one client, local stack (moto server)\n"
    )
    print(
        f"{'batch':>5} | {'produce msg/s':>13} | {'p50 send ms':>11} | {'recv+ack msg/s':>14} |"
        f" {'SQS send msg/s':>14} | {'SQS recv+del msg/s':>18}"
    )
    for run in runs:
        print(
            f"{run.batch:>5} | {run.produce.rate:>13.1f} |"
            f" {1000 * statistics.median(run.produce.latencies):>11.1f} |"
            f" {run.consume.rate:>14.1f} | {run.sqs_send:>14.1f} | {run.sqs_recv:>18.1f}"
        )
    print(
        f"  SQS through the first stack's moto server, {messages} messages of {BODY_BYTES} B,"
        " batches capped at 10 (batches 100 and 1000 show the batch-10 round); CirrusMQ produces"
        " with a producer id + sequence and client message ids, as the SDK's Producer does"
    )


def print_calls(runs: list[BatchRun]) -> None:
    print("\nPer 1,000 messages, by request kind (DynamoDB units computed from item sizes):")
    print(
        f"{'batch':>5} {'kind':<8}| {'requests':>8} | {'S3 PUT':>7} | {'S3 GET':>7} |"
        f" {'DDB rd calls':>12} | {'DDB wr calls':>12} | {'RRU':>8} | {'WRU':>8} |"
        f" {'p50 handler ms':>14} | {'p50 CPU ms':>10} | {'Lambda GB-s':>11}"
    )
    for run in runs:
        n = run.messages
        rows = [(kind, run.usage(kind)) for kind in KINDS] + [("total", run.total())]
        for kind, u in rows:
            p50 = statistics.median(u.handler_ms) if kind != "total" and u.handler_ms else None
            cpu = (
                statistics.median(1000 * i.cpu_s for i in u.invocations)
                if kind != "total" and u.invocations
                else None
            )
            print(
                f"{run.batch:>5} {kind:<8}| {per_1000(u.requests, n):>8.1f} |"
                f" {per_1000(u.calls['S3 PUT'], n):>7.1f} |"
                f" {per_1000(u.calls['S3 GET'], n):>7.1f} |"
                f" {per_1000(u.calls['DynamoDB read'], n):>12.1f} |"
                f" {per_1000(u.calls['DynamoDB write'], n):>12.1f} |"
                f" {per_1000(u.rru, n):>8.1f} | {per_1000(u.wru, n):>8.1f} |"
                f" {'' if p50 is None else f'{p50:.1f}':>14} |"
                f" {'' if cpu is None else f'{cpu:.1f}':>10} |"
                f" {per_1000(u.billed_gb_s(), n):>11.3f}"
            )
    for what, units_of in (
        ("write", lambda u: u.write_units),
        ("read", lambda u: u.read_units),
    ):
        print(f"\nDynamoDB {what} units per 1,000 messages, by table (/index):")
        labels = sorted({label for run in runs for label in units_of(run.total())})
        print(f"{'batch':>5} | " + " | ".join(f"{label:>24}" for label in labels))
        for run in runs:
            units = units_of(run.total())
            cells = [f"{per_1000(units[label], run.messages):>24.1f}" for label in labels]
            print(f"{run.batch:>5} | " + " | ".join(cells))
    extra = merged(run.total() for run in runs)
    other = {k: v for k, v in extra.calls.items() if k.startswith(("S3 other", "DynamoDB "))}
    other.pop("DynamoDB read", None)
    other.pop("DynamoDB write", None)
    print(
        f"  other calls: {other or 'none'}; failed conditional writes:"
        f" {extra.failed_writes}; writes sized by estimate: {extra.estimated_writes}"
    )


def verdict(
    batch: int, total: float, without_duration: float, profile: Profile = PROFILES["default"]
) -> str:
    """The profile's goal at ``batch`` (Lambda duration counted) and whether it is met."""
    goal = profile.goals.get(batch)
    if goal is None:
        return ""
    if total <= goal:
        return f"<= ${goal:.3f}: met"
    short = f"NOT met by ${total - goal:.4f}"
    if without_duration <= goal:
        return f"<= ${goal:.3f}: {short} (met without Lambda duration)"
    return f"<= ${goal:.3f}: {short} (${without_duration - goal:.4f} without Lambda duration)"


def per_million_cost(
    usage: Usage,
    messages: int,
    *,
    s3_express: bool = False,
    profile: Profile = PROFILES["default"],
    front_door: str = "http-api",
) -> dict[str, float]:
    cost = usage.cost(s3_express=s3_express, profile=profile, front_door=front_door)
    return {k: v * 1_000_000 / messages for k, v in cost.items()}


def aws_duration_per_million(
    usage: Usage, messages: int, profile: Profile, *, s3_express: bool = False
) -> tuple[float, float]:
    """$ per million messages of Lambda duration on paper for AWS (low, high): the CPU time
    measured here at the profile's CPU share, the waits of :data:`AWS_CALL_MS`."""
    return tuple(  # type: ignore[return-value]
        usage.aws_gb_s(profile.memory_mb, bound, s3_express=s3_express)
        * PRICE["lambda_gb_s"]
        * 1_000_000
        / messages
        for bound in (0, 1)
    )


def print_profiles(
    runs: list[BatchRun],
    profiles: list[Profile],
    memory_mb: int,
    *,
    s3_express: bool = False,
    front_door: str = "http-api",
    leases_on_summary: str = "off",
) -> None:
    """One table per profile: the same counted calls at the profile's prices, its goals
    (``leases_on_summary``: the LeasesOnSummary the calls were measured with)."""
    for profile in profiles:
        memory = profile.memory_mb or memory_mb
        ddb = (
            f"provisioned at {PROVISIONED_UTILIZATION:.0%} target utilization"
            f" (${PROVISIONED_PRICE['wcu_hour']}/WCU-h, ${PROVISIONED_PRICE['rcu_hour']}/RCU-h"
            f" = ${PROVISIONED_WRITE_UNIT * 1e6:.3f}/M WRU, ${PROVISIONED_READ_UNIT * 1e6:.4f}/M"
            f" RRU used) on {', '.join(sorted(PROVISIONED_TABLES))}, on-demand elsewhere"
            if profile.dynamodb == "provisioned"
            else f"on-demand (${PRICE['ddb_write_unit'] * 1e6:.3f}/M WRU,"
            f" ${PRICE['ddb_read_unit'] * 1e6:.3f}/M RRU)"
        )
        door = (
            "HTTP API ($1.00/M requests)"
            if front_door == "http-api"
            else "Lambda function URL (no charge of its own)"
        )
        storage = "S3 Express One Zone" if s3_express else "S3 Standard"
        print(
            f"\nProfile {profile.name!r} ({profile.parameters}) measured with"
            f" LeasesOnSummary={leases_on_summary}, through"
            f" FrontDoor={front_door}: {door}; DynamoDB {ddb};"
            f" Lambda arm64 at {memory} MB; batch objects in {storage}. $ per million"
            " messages (produce + receive + ack, acks riding on receives), goals with Lambda"
            " duration counted:"
        )
        components = list(Usage().cost())
        print(
            f"{'batch':>5} | "
            + " | ".join(f"{c:>11}" for c in components)
            + f" | {'total':>8} | {'w/o GB-s':>8} | {'with AWS GB-s on paper':>22} | goal"
        )
        for run in runs:
            cost = per_million_cost(
                run.total(),
                run.messages,
                s3_express=s3_express,
                profile=profile,
                front_door=front_door,
            )
            total = sum(cost.values())
            without = total - cost["Lambda GB-s"]
            low, high = aws_duration_per_million(
                run.total(), run.messages, profile, s3_express=s3_express
            )
            print(
                f"{run.batch:>5} | "
                + " | ".join(f"{cost[c]:>11.4f}" for c in components)
                + f" | {total:>8.4f} | {without:>8.4f} |"
                + f" {f'{without + low:.4f}-{without + high:.4f}':>22} |"
                f" {verdict(run.batch, total, without, profile)}"
            )
        s3_ms = AWS_EXPRESS_CALL_MS if s3_express else AWS_CALL_MS["S3 PUT"]
        print(
            "  Lambda GB-s: the wait measured here plus the CPU time at the MemorySize's CPU"
            f" share (one vCPU at {FULL_VCPU_MB} MB); on paper for AWS: the same CPU time and"
            f" each call's published latency in AWS instead of moto's ({storage}"
            f" {s3_ms[0]}-{s3_ms[1]} ms, DynamoDB and other calls 1-10 ms), calls one after"
            " another"
        )


def print_costs(
    runs: list[BatchRun], *, s3_express: bool = False, front_door: str = "http-api"
) -> None:
    print(
        f"\n$ per million messages (produce + receive + ack) through FrontDoor={front_door},"
        f" {PRICES_AS_OF}, acks riding on receives; Lambda GB-s = the wait measured here"
        " + the CPU time at the MemorySize's CPU share:"
    )
    components = list(Usage().cost())
    print(
        f"{'batch':>5} | "
        + " | ".join(f"{c:>11}" for c in components)
        + f" | {'total':>8} | {'w/o GB-s':>8} | {'SQS same':>8} | {'vs SQS $0.12':>12} | goal"
    )
    for run in runs:
        cost = per_million_cost(run.total(), run.messages, front_door=front_door)
        total = sum(cost.values())
        without = total - cost["Lambda GB-s"]
        print(
            f"{run.batch:>5} | "
            + " | ".join(f"{cost[c]:>11.4f}" for c in components)
            + f" | {total:>8.4f} | {without:>8.4f} | {sqs_cost_per_million(run.batch):>8.2f} |"
            f" {total / SQS_BEST_PER_MILLION:>11.2f}x | {verdict(run.batch, total, without)}"
        )
    print(
        "  SQS same = SQS standard, send + receive + delete at the same batch (capped at 10;"
        f" 64 KB chunks); best (batches of 10): ${SQS_BEST_PER_MILLION:.2f}"
    )
    if any(run.standalone is not None for run in runs):
        print(
            "\nBefore / after in this run: a standalone ack after each receive vs acks carried"
            " by the next receive ($ per million messages; requests per 1,000 messages):"
        )
        print(
            f"{'batch':>5} | {'standalone':>10} | {'w/o GB-s':>8} | {'requests':>8} |"
            f" {'on receive':>10} | {'w/o GB-s':>8} | {'requests':>8} | {'after/before':>12}"
        )
        for run in runs:
            before = run.total_standalone()
            if before is None:
                continue
            rows = []
            for usage in (before, run.total()):
                cost = per_million_cost(usage, run.messages, front_door=front_door)
                total = sum(cost.values())
                rows.append(
                    (total, total - cost["Lambda GB-s"], per_1000(usage.requests, run.messages))
                )
            (b, bw, br), (a, aw, ar) = rows
            print(
                f"{run.batch:>5} | {b:>10.4f} | {bw:>8.4f} | {br:>8.1f} | {a:>10.4f} |"
                f" {aw:>8.4f} | {ar:>8.1f} | {a / b:>11.2f}x"
            )
    if s3_express:
        print(
            "\nThe same with the batch objects in S3 Express One Zone (single AZ; "
            f"{S3_EXPRESS_AS_OF}: PUT $0.00113/1k, GET $0.00003/1k, upload $0.0032/GB,"
            " retrieval $0.0006/GB; storage not counted), acks riding on receives:"
        )
        print(
            f"{'batch':>5} | {'S3 PUT':>8} | {'S3 GET':>8} | {'total':>8} | {'w/o GB-s':>8} |"
            f" {'SQS same':>8} | {'vs SQS $0.12':>12} | goal"
        )
        for run in runs:
            cost = per_million_cost(
                run.total(), run.messages, s3_express=True, front_door=front_door
            )
            total = sum(cost.values())
            without = total - cost["Lambda GB-s"]
            print(
                f"{run.batch:>5} | {cost['S3 PUT']:>8.4f} | {cost['S3 GET']:>8.4f} |"
                f" {total:>8.4f} | {without:>8.4f} | {sqs_cost_per_million(run.batch):>8.2f} |"
                f" {total / SQS_BEST_PER_MILLION:>11.2f}x | {verdict(run.batch, total, without)}"
            )
    records = [
        f"batch {r.batch}: ${per_million(r.total().write_units['ProducersTable'], r):.4f}"
        for r in runs
    ]
    print(
        "  of the DynamoDB writes, idempotency records (ProducersTable), $ per million messages:"
        f" {', '.join(records)}"
    )
    floors = ", ".join(f"batch {r.batch}: ${design_floor(r.batch):.4f}" for r in runs)
    print(
        "  DESIGN.md §6 floor (arithmetic, not measured): per send 1 S3 PUT + a one-item"
        " DynamoDB transaction (2 WRU), per receive 1 conditional write + 1 S3 GET, per ack 1"
        " write; HTTP API + Lambda requests for the 3 calls; no reads, no Lambda duration,"
        f" no idempotency record, no head item, no nonce: {floors}"
    )


def design_floor(batch: int) -> float:
    """$ per million messages of the physical floor DESIGN.md §6 names, at ``batch``."""
    send_receive_ack = (
        PRICE["s3_put"]
        + PRICE["s3_get"]
        + (2 + 1 + 1) * PRICE["ddb_write_unit"]
        + 3 * (PRICE["api_request"] + PRICE["lambda_request"])
    )
    return 1_000_000 / batch * send_receive_ack


def per_million(write_units: float, run: BatchRun) -> float:
    return write_units * PRICE["ddb_write_unit"] * 1_000_000 / run.messages


def describe(u: Usage) -> str:
    tables = ", ".join(f"{k} {v:g}" for k, v in sorted(u.write_units.items()))
    return (
        f"{u.calls['DynamoDB read']} reads = {u.rru:g} RRU, "
        f"{u.calls['DynamoDB write']} writes = {u.wru:g} WRU" + (f" ({tables})" if tables else "")
    )


def print_inflight(
    cases: list[InflightCase], at_limit: Usage | None, setup_s: float, leases_on_summary: str
) -> None:
    print(
        "\nGroup state with messages in flight on one (group, queue) (1-queue topic;"
        f" LeasesOnSummary={leases_on_summary}):"
    )
    for case in cases:
        print(
            f"  {case.inflight:>5} in flight: state item {case.state_bytes:,} B"
            f" (shadow {case.shadow_bytes:,} B)" + (f"; {case.note}" if case.note else "")
        )
        print(f"        one ack:     {describe(case.ack)}")
        print(f"        one receive: {describe(case.receive)}")
    if at_limit is not None:
        print(
            f"  a receive at the lease limit ({cases[-1].inflight} leases) delivers nothing and"
            f" costs {describe(at_limit)}"
        )
    print(f"  (holding the leases took {setup_s:.0f} s)")


def monthly(per_poll: dict[str, float], polls: float) -> float:
    return sum(per_poll.values()) * polls


def print_idle(idle: IdleCosts, memory_mb: int, front_door: str = "http-api") -> None:
    print(
        f"\nIdle consumer on an idle 8-queue topic, per month (30 days), through"
        f" FrontDoor={front_door}, {PRICES_AS_OF}:"
    )
    long_cost = idle.long_poll.cost(front_door=front_door)
    long_polls = MONTH_S / idle.long_poll_s
    print(
        f"  (a) server long poll, wait_seconds=20: one poll measured: {idle.long_poll_s:.1f} s,"
        f" {describe(idle.long_poll)}, Lambda {idle.long_poll.billed_gb_s():.1f} GB-s"
        f" ({memory_mb} MB)"
    )
    print(
        f"      {long_polls:,.0f} polls/month: ${monthly(long_cost, long_polls):.2f}/month"
        f" (Lambda GB-s ${long_cost['Lambda GB-s'] * long_polls:.2f}, DynamoDB reads"
        f" ${long_cost['DDB read'] * long_polls:.2f}, HTTP API + Lambda requests"
        f" ${(long_cost['HTTP API'] + long_cost['Lambda req']) * long_polls:.2f});"
        " latency: at once"
    )
    n = idle.short_poll_count
    per_poll = {k: v / n for k, v in idle.short_polls.cost(front_door=front_door).items()}
    ms = statistics.median(idle.short_polls.handler_ms)
    print(
        f"  (b) PushConsumer adaptive polling, wait_seconds=0, max_poll_interval_s default"
        f" {idle.max_interval_s:g} s: one poll measured (mean of {n}):"
        f" {idle.short_polls.calls['DynamoDB read'] / n:g} reads = {idle.short_polls.rru / n:g}"
        f" RRU, {idle.short_polls.wru / n:g} WRU, handler p50 {ms:.1f} ms"
        f" ({idle.short_polls.billed_gb_s() / n:.4f} GB-s billed)"
    )
    for cap in sorted({idle.max_interval_s, 20.0}):
        polls = MONTH_S / cap
        label = "default" if cap == idle.max_interval_s else "option "
        print(
            f"      cap {cap:g} s ({label}): {polls:,.0f} polls/month:"
            f" ${monthly(per_poll, polls):.2f}/month (without Lambda duration"
            f" ${monthly(per_poll, polls) - per_poll['Lambda GB-s'] * polls:.2f});"
            f" latency bound {cap:g} s + one receive (~{idle.short_poll_wall_ms:.0f} ms here)"
        )
    print(
        f"  SQS long polling (20 s polls: {MONTH_S / 20:,.0f} requests/month):"
        f" ${SQS_IDLE_PER_MONTH:.2f}/month"
    )


# ============================================================== machine-readable summary
def quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def latency_summary(latencies: list[float]) -> dict[str, float | int | None]:
    """p50 / p99 / max in milliseconds of per-request wall times (seconds)."""
    ms = [x * 1000 for x in latencies]
    return {
        "requests": len(ms),
        "p50_ms": quantile(ms, 0.5),
        "p99_ms": quantile(ms, 0.99),
        "max_ms": max(ms) if ms else None,
    }


def summary(
    doors: list[DoorRun],
    profiles: list[Profile],
    memory_mb: int,
    idle: IdleCosts,
    *,
    s3_express: bool = False,
    leases_on_summary: str,
) -> dict[str, Any]:
    """The run's figures as JSON-ready data (``--json``): costs from counted calls, each
    profile's from the stack it was measured on; with more than one front door measured, a
    profile's name carries the door (``steady function-url``) and the batches' other
    figures are the first stack's."""
    batches = []
    runs = doors[0].runs
    front_doors = list(dict.fromkeys(door.front_door for door in doors))
    by_name = {profile.name: profile for profile in profiles}
    measured = {
        (front_door, profile.name): run_of(doors, front_door, profile, leases_on_summary)
        for front_door in front_doors
        for profile in profiles
    }
    named = {key: key[1] if len(front_doors) == 1 else f"{key[1]} {key[0]}" for key in measured}
    for index, run in enumerate(runs):
        priced = {}
        for front_door in front_doors:
            for profile in profiles:
                door = measured[front_door, profile.name]
                door_run = door.runs[index]
                cost = per_million_cost(
                    door_run.total(),
                    door_run.messages,
                    s3_express=s3_express,
                    profile=profile,
                    front_door=door.front_door,
                )
                total = sum(cost.values())
                priced[named[door.front_door, profile.name]] = {
                    "components": cost,
                    "total": total,
                    "without_lambda_duration": total - cost["Lambda GB-s"],
                    "aws_lambda_duration": aws_duration_per_million(
                        door_run.total(), door_run.messages, profile, s3_express=s3_express
                    ),
                    "goal": profile.goals.get(run.batch),
                }
        batches.append(
            {
                "batch": run.batch,
                "messages": run.messages,
                "profiles": priced,
                "sqs_same_batch": sqs_cost_per_million(run.batch),
                "design_floor": design_floor(run.batch),
                "requests_per_1000": per_1000(run.total().requests, run.messages),
                "produce_rate": run.produce.rate,
                "consume_rate": run.consume.rate,
                "produce_latency": latency_summary(run.produce.latencies),
                "receive_ack_latency": latency_summary(run.consume.latencies),
            }
        )
    long_cost = idle.long_poll.cost(front_door=doors[0].front_door)
    long_polls = MONTH_S / idle.long_poll_s
    per_poll = {
        k: v / idle.short_poll_count
        for k, v in idle.short_polls.cost(front_door=doors[0].front_door).items()
    }
    push_polls = MONTH_S / idle.max_interval_s
    return {
        "prices": PRICES_AS_OF,
        "memory_mb": memory_mb,
        "aws_s3_latency_ms": AWS_EXPRESS_CALL_MS if s3_express else AWS_CALL_MS["S3 PUT"],
        "batch_storage": "S3 Express One Zone" if s3_express else "S3 Standard",
        "sqs_best": SQS_BEST_PER_MILLION,
        "profiles": {
            named[key]: f"{by_name[key[1]].parameters} FrontDoor={door.front_door}"
            f" (measured with LeasesOnSummary={door.leases_on_summary})"
            for key, door in measured.items()
        },
        "batches": batches,
        "idle": {
            "long_poll_month": monthly(long_cost, long_polls),
            "push_consumer_month": monthly(per_poll, push_polls),
            "push_max_interval_s": idle.max_interval_s,
            "sqs_long_poll_month": SQS_IDLE_PER_MONTH,
        },
    }


# ============================================================== main
@dataclass
class DoorRun:
    """The batch rounds measured through one front door (a stack deployed with it)."""

    front_door: str
    runs: list[BatchRun]
    memory_mb: int
    stored_in: str
    check: tuple[int, int, int]
    leases_on_summary: str = "off"


def print_front_doors(
    doors: list[DoorRun], profiles: list[Profile], leases_on_summary: str, *, s3_express: bool
) -> None:
    """Each profile at each batch size through each front door measured, side by side."""
    print(
        "\nFront doors compared ($ per million messages, produce + receive + ack, acks riding"
        " on receives; each door its own stack and rounds; w/o = without Lambda duration):"
    )
    names = list(dict.fromkeys(door.front_door for door in doors))
    print(
        f"{'batch':>5} | {'profile':>8} | "
        + " | ".join(f"{n:>12} | {'w/o':>8} | {'req/1k':>6}" for n in names)
        + f" | {'SQS same':>8}"
    )
    for index, run in enumerate(doors[0].runs):
        for profile in profiles:
            cells = []
            for name in names:
                measured = run_of(doors, name, profile, leases_on_summary).runs[index]
                cost = per_million_cost(
                    measured.total(),
                    measured.messages,
                    s3_express=s3_express,
                    profile=profile,
                    front_door=name,
                )
                total = sum(cost.values())
                requests = per_1000(measured.total().requests, measured.messages)
                cells.append(
                    f"{total:>12.4f} | {total - cost['Lambda GB-s']:>8.4f} | {requests:>6.1f}"
                )
            print(
                f"{run.batch:>5} | {profile.name:>8} | "
                + " | ".join(cells)
                + f" | {sqs_cost_per_million(run.batch):>8.2f}"
            )


def deployed_settings(profiles: list[Profile], leases_on_summary: str) -> list[str]:
    """The LeasesOnSummary values to deploy a stack with: each profile's own
    (``profile``), or the one named for all."""
    if leases_on_summary == "profile":
        return sorted({p.leases_on_summary for p in profiles})
    return [leases_on_summary]


def priced_on(door: DoorRun, profiles: list[Profile], leases_on_summary: str) -> list[Profile]:
    """The profiles priced from ``door``'s calls: those deployed as it was (``profile``),
    or all of them."""
    if leases_on_summary != "profile":
        return profiles
    return [p for p in profiles if p.leases_on_summary == door.leases_on_summary]


def run_of(
    doors: list[DoorRun], front_door: str, profile: Profile, leases_on_summary: str
) -> DoorRun:
    """The stack ``profile`` is priced from through ``front_door``."""
    return next(
        door
        for door in doors
        if door.front_door == front_door and priced_on(door, [profile], leases_on_summary)
    )


def front_doors(text: str) -> list[str]:
    """``--front-door``: FrontDoor values, comma-separated."""
    doors = list(dict.fromkeys(text.split(",")))
    if not doors or any(door not in FRONT_DOORS for door in doors):
        raise argparse.ArgumentTypeError(f"one or more of {', '.join(FRONT_DOORS)}")
    return doors


def batch_storage(stack: LocalStack) -> str:
    """Where this run's batch objects are: the directory bucket or the message bucket."""
    s3 = stack.boto3_client("s3")
    for logical_id in ("BatchDirectoryBucket", "MessageBucket"):
        bucket = stack.resources.get(logical_id)
        if bucket is None:
            continue
        request, count = {"Bucket": bucket}, 0
        while True:
            page = s3.list_objects_v2(**request)
            count += sum("topics/" in o["Key"] for o in page.get("Contents", []))
            if not page.get("IsTruncated"):
                break
            request["ContinuationToken"] = page["NextContinuationToken"]
        if count:
            return f"{count} in {logical_id} ({bucket})"
    return "none"


def measured_stack(parameters: dict[str, str]) -> LocalStack:
    """A local stack as the benchmarks measure it: handlers imported up front (no cold
    start counted), no schedules or expiry sweeps running beside the requests."""
    return LocalStack(
        schedules=False,
        preload_handlers=True,
        expire_interval=None,
        credentials=CREDENTIALS,
        parameters=parameters,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages per batch size")
    parser.add_argument(
        "--inflight", type=int, default=2000, help="leases held for the in-flight case"
    )
    parser.add_argument(
        "--batches",
        type=lambda text: tuple(int(b) for b in text.split(",")),
        default=BATCH_SIZES,
        help="batch sizes to run, comma-separated (default 1,10,100,1000)",
    )
    parser.add_argument(
        "--no-piggyback",
        action="store_true",
        help="ack each delivery in a request of its own only (no before/after comparison)",
    )
    parser.add_argument(
        "--s3-express",
        action="store_true",
        help="store the batch objects in the template's S3 Express One Zone directory bucket"
        " (BatchStorage=express) and price them at its rates too",
    )
    parser.add_argument(
        "--no-warm-up",
        action="store_true",
        help="count the group's one-off writes (subscription, a state item per queue) in"
        " the first round instead of leaving them out as a warm-up",
    )
    parser.add_argument(
        "--profile",
        type=lambda text: [PROFILES[name] for name in text.split(",")],
        default=list(PROFILES.values()),
        help="deployment profiles to price the counted calls at, comma-separated:"
        f" {', '.join(PROFILES)} (default: all)",
    )
    parser.add_argument(
        "--front-door",
        type=front_doors,
        default=["http-api"],
        help="the template's FrontDoor to measure through, comma-separated:"
        f" {', '.join(FRONT_DOORS)} (default http-api); the batch rounds run once per door",
    )
    parser.add_argument(
        "--leases-on-summary",
        choices=("profile", "off", "on"),
        default="profile",
        help="the template's LeasesOnSummary to deploy with: each profile's own (default:"
        " the rounds run once per value the profiles name, default off, steady on), or one"
        " value every profile is priced from",
    )
    parser.add_argument(
        "--json", type=Path, help="also write the figures to this file as JSON (make bench-report)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    doors: list[DoorRun] = []
    sqs_rates: dict[int, tuple[float, float]] = {}
    deployments = [
        (front_door, setting)
        for front_door in args.front_door
        for setting in deployed_settings(args.profile, args.leases_on_summary)
    ]
    for index, (front_door, setting) in enumerate(deployments):
        parameters = {
            **(EXPRESS_PARAMETERS if args.s3_express else {}),
            "FrontDoor": front_door,
            "LeasesOnSummary": setting,
        }
        print(f"FrontDoor={front_door} LeasesOnSummary={setting}: batch rounds", file=sys.stderr)
        with (
            measured_stack(parameters) as stack,
            httpx.Client(base_url=stack.endpoint, timeout=120, auth=SIGNED) as api,
        ):
            meter = Meter(describe_tables(stack.boto3_client("dynamodb"), dict(stack.resources)))
            undo = meter.install()
            try:
                client = Client(api)
                runs = run_batches(
                    client,
                    meter,
                    stack.boto3_client("sqs"),
                    args.messages,
                    args.batches,
                    piggyback=not args.no_piggyback,
                    warm=not args.no_warm_up,
                    sqs_rates=sqs_rates,
                )
                if index == 0:
                    cases, at_limit, setup_s = run_inflight(stack, client, meter, args.inflight)
                    idle = run_idle(client, meter)
            finally:
                undo()
            print(f"checking item sizes ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
            check = meter.check_against(stack.boto3_client("dynamodb"))
            memory = max(fn.function.memory_size for fn in stack.functions.values())
            doors.append(DoorRun(front_door, runs, memory, batch_storage(stack), check, setting))
    for door in doors:
        print(f"\n======== FrontDoor={door.front_door} LeasesOnSummary={door.leases_on_summary}")
        print_throughput(door.runs, args.messages)
        print_calls(door.runs)
        if PROFILES["default"] in priced_on(door, list(PROFILES.values()), args.leases_on_summary):
            # calls at the default deployment's prices and goals: its own stack's only
            print_costs(door.runs, s3_express=args.s3_express, front_door=door.front_door)
        print_profiles(
            door.runs,
            priced_on(door, args.profile, args.leases_on_summary),
            door.memory_mb,
            s3_express=args.s3_express,
            front_door=door.front_door,
            leases_on_summary=door.leases_on_summary,
        )
        print(f"  batch objects stored: {door.stored_in}")
    if len(args.front_door) > 1:
        print_front_doors(doors, args.profile, args.leases_on_summary, s3_express=args.s3_express)
    memory = doors[0].memory_mb
    print_inflight(cases, at_limit, setup_s, doors[0].leases_on_summary)
    print_idle(idle, memory, doors[0].front_door)
    print(
        f"\nPrices: {PRICES_AS_OF} — Lambda arm64 $0.0000133334/GB-s + $0.20/M requests;"
        " HTTP API $1.00/M; a function URL nothing of its own; DynamoDB on-demand $0.625/M"
        " WRU, $0.125/M RRU; S3 PUT $0.005/1k, GET $0.0004/1k; SQS standard $0.40/M requests"
        " (64 KB chunks)."
    )
    for door in doors:
        compared, differing, largest = door.check
        print(
            f"FrontDoor={door.front_door} LeasesOnSummary={door.leases_on_summary}: Lambda"
            f" MemorySize from template.yaml {door.memory_mb} MB (the largest). Item sizes of"
            f" the shadow copies checked against moto: {compared} items, {differing} differ"
            f" (largest difference {largest} B)."
        )
    print(f"Run time {time.perf_counter() - started:.0f} s.")
    if args.json:
        data = summary(
            doors,
            args.profile,
            memory,
            idle,
            s3_express=args.s3_express,
            leases_on_summary=args.leases_on_summary,
        )
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
