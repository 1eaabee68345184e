"""``LocalStack``: moto + the template's tables/bucket + the HTTP gateway + the schedules."""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cirrusmq.credentials import Credentials
from cirrusmq_broker import clock
from cirrusmq_broker.storage.delays.invoke import register_local

from cirrusmq_local.directory_buckets import enforce_directory_bucket_rules
from cirrusmq_local.env import EnvironmentPatch
from cirrusmq_local.expiry import Expiry, wall_ms
from cirrusmq_local.gateway import Gateway
from cirrusmq_local.lambda_runtime import FunctionRuntime
from cirrusmq_local.local_routes import LocalRoutes
from cirrusmq_local.moto import DUMMY_CREDENTIALS, REGION, MotoServer
from cirrusmq_local.resolver import Resolver, generate_secret, resolve_parameters
from cirrusmq_local.resources import create_resources
from cirrusmq_local.schedules import ScheduledJob, ScheduleRunner
from cirrusmq_local.streams import StreamPoller, StreamSource
from cirrusmq_local.telemetry import LocalTelemetry, MetricForwarder
from cirrusmq_local.template import (
    DIRECTORY_BUCKET_TYPE,
    Function,
    HttpRoute,
    Template,
    TemplateError,
    load_template,
)
from cirrusmq_local.websocket import WebSocketGateway

__all__ = ["BOOTSTRAP_ACCESS_KEY", "LocalStack", "TemplateError", "default_template_path"]

_RUNNING: set[int] = set()
"""Stacks of this process whose moto runs: the clock goes back to wall time when the last
one stops (a test's own stack stopping must not turn back the session stack's time)."""

log = logging.getLogger(__name__)

CLOCK_FILE = "clock.json"
ADMIN_KEY_FILE = "admin-key.json"
"""A data dir's admin key (without ``$CIRRUSMQ_ACCESS_KEY`` / ``$CIRRUSMQ_SECRET_KEY``)."""
BOOTSTRAP_ACCESS_KEY = "local-admin"
ACCESS_KEY_VAR = "CIRRUSMQ_ACCESS_KEY"
SECRET_KEY_VAR = "CIRRUSMQ_SECRET_KEY"
ENDPOINT_VAR = "CIRRUSMQ_AWS_ENDPOINT_URL"
REGION_VAR = "CIRRUSMQ_AWS_REGION"
WEBSOCKET_URL_VAR = "CIRRUSMQ_WEBSOCKET_URL"
CALLBACK_URL_VAR = "CIRRUSMQ_WEBSOCKET_CALLBACK_URL"
LOCAL_VARIABLES = {"POWERTOOLS_TRACE_DISABLED": "true"}
"""Set for every function locally: no X-Ray daemon here (Powertools' Tracer also turns itself
off outside Lambda; this says so explicitly)."""


def default_template_path() -> Path:
    """``$CIRRUSMQ_TEMPLATE``, else the repository's ``template.yaml`` (in a checkout), else
    the copy an installed wheel carries (``cirrusmq_local/stack/``, with the functions)."""
    override = os.environ.get("CIRRUSMQ_TEMPLATE")
    if override:
        return Path(override)
    here = Path(__file__).resolve().parent
    checkout = here.parent.parent / "template.yaml"
    if checkout.is_file() and (checkout.parent / "functions").is_dir():
        return checkout
    return here / "stack" / "template.yaml"


FUNCTION_URL_ROUTE = HttpRoute("FunctionUrl", "ANY", "$default")
"""How the gateway serves a function URL: every request goes to the one function, with the
route key ``$default`` and no path parameters, as a function URL sends it."""


def front_door_routes(
    functions: list[Function], runtimes: Mapping[str, FunctionRuntime]
) -> list[tuple[HttpRoute, FunctionRuntime]]:
    """What the gateway serves: the enabled functions' HttpApi routes, or the one enabled
    function URL (``FrontDoor=function-url``); the local stack serves one front door."""
    routes = [(route, runtimes[fn.logical_id]) for fn in functions for route in fn.http_routes]
    urls = [fn for fn in functions if fn.function_url]
    if not urls:
        return routes
    if len(urls) > 1 or routes:
        names = ", ".join(fn.logical_id for fn in urls)
        raise TemplateError(
            f"the local stack serves one front door: function URLs ({names})"
            + (" next to HttpApi routes" if routes else "")
        )
    return [(FUNCTION_URL_ROUTE, runtimes[urls[0].logical_id])]


def _invoke(runtime: FunctionRuntime, event: Any) -> Any:
    """``runtime.invoke(event)``, looked up at each call (so a wrapper of
    ``FunctionRuntime.invoke`` installed after the start, a benchmark's meter, sees it)."""
    return runtime.invoke(event)


def _loopback(host: str) -> str:
    return {"0.0.0.0": "127.0.0.1", "::": "127.0.0.1", "": "127.0.0.1"}.get(host, host)


def bootstrap_credentials(data_dir: Path | None = None) -> Credentials:
    """``$CIRRUSMQ_ACCESS_KEY`` / ``$CIRRUSMQ_SECRET_KEY`` when both are set, else
    ``local-admin`` with a random secret: on a data dir, the one its first start drew (kept
    in ``ADMIN_KEY_FILE``, readable by its owner only), so processes that read the key
    before a restart still sign correctly after it; without one, a fresh secret."""
    access_key, secret_key = os.environ.get(ACCESS_KEY_VAR), os.environ.get(SECRET_KEY_VAR)
    if access_key and secret_key:
        return Credentials(access_key, secret_key)
    if data_dir is None:
        return Credentials(BOOTSTRAP_ACCESS_KEY, generate_secret(40))
    path = data_dir / ADMIN_KEY_FILE
    if path.exists():
        kept = json.loads(path.read_text())
        return Credentials(kept["access_key"], kept["secret_key"])
    credentials = Credentials(BOOTSTRAP_ACCESS_KEY, generate_secret(40))
    data_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        kept = {"access_key": credentials.access_key, "secret_key": credentials.secret_key}
        json.dump(kept, file)
        file.flush()
        os.fsync(file.fileno())
    return credentials


START_AT_ONCE = frozenset({("SchedulerFunction", "MoveDueTimers")})
"""Schedules that fire as the stack starts: the delay scheduler works through each minute
on the broker clock, so delayed messages are moved from the first second (on AWS its first
firing comes within a minute of the deployment)."""
WOKEN_BY_INVOKE = ("SchedulerFunction", "TxnCheckerFunction")
"""Functions the broker starts out of their schedule (an asynchronous Lambda invoke on AWS):
here their schedule's timer fires at once."""


class LocalStack:
    """The whole CirrusMQ backend on this machine, built from ``template.yaml``.

    ``with LocalStack() as stack: ...`` or ``stack.start()`` / ``stack.stop()``. While it runs,
    ``endpoint`` is the HTTP API, ``aws_endpoint`` the moto server, ``resources`` maps logical
    ids to table/bucket names, and ``os.environ`` holds the functions' variables plus
    ``CIRRUSMQ_AWS_ENDPOINT_URL`` / ``CIRRUSMQ_AWS_REGION`` (put back on :meth:`stop`).

    What AWS does by itself runs here on a timer (every ``expire_interval`` seconds, None:
    only on demand): DynamoDB TTL deletes and the bucket's lifecycle expiry, both on the
    broker's clock — see :meth:`advance_time` and :meth:`expire_now`.

    The functions' log lines and EMF metrics are kept in :attr:`telemetry` (queried through
    ``GET /local/metrics`` and ``/local/logs`` too, :mod:`cirrusmq_local.local_routes`);
    ``function_logs`` receives each log line, prefixed with the function's logical id: every
    one when ``follow_logs``, else only ERROR and CRITICAL ones.
    """

    def __init__(
        self,
        template: str | Path | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        parameters: Mapping[str, Any] | None = None,
        schedules: bool = True,
        stack_name: str = "local",
        credentials: Credentials | None = None,
        preload_handlers: bool = False,
        expire_interval: float | None = 10.0,
        function_logs: Callable[[str], None] | None = None,
        follow_logs: bool = False,
        data_dir: str | Path | None = None,
    ) -> None:
        self.template_path = Path(template) if template is not None else default_template_path()
        self.host = host
        self._requested_port = port
        self.parameter_overrides = dict(parameters or {})
        self.schedules_enabled = schedules
        self.stack_name = stack_name
        self.preload_handlers = preload_handlers
        self.expire_interval = expire_interval
        self.data_dir = Path(data_dir) if data_dir is not None else None
        """Where topics, messages, groups, keys (moto's DynamoDB, S3 and KMS, in ``moto/``)
        and the clock's offset (``clock.json``) are kept across restarts; None: memory only."""
        self.credentials = credentials or bootstrap_credentials(self.data_dir)
        """The admin key the stack stores at start: ``credentials``, else
        ``$CIRRUSMQ_ACCESS_KEY`` / ``$CIRRUSMQ_SECRET_KEY`` when both are set, else
        ``local-admin`` with a random secret (on a data dir, the one its first start drew)."""
        self.template: Template | None = None
        self.telemetry = LocalTelemetry(echo=function_logs, follow=follow_logs)
        """What the functions wrote: log lines and a store of their EMF metrics."""
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self._moto: MotoServer | None = None
        self._gateway: Gateway | None = None
        self._runner: ScheduleRunner | None = None
        self._expiry: Expiry | None = None
        self._env: EnvironmentPatch | None = None
        self._runtimes: dict[str, FunctionRuntime] = {}
        self._jobs: dict[tuple[str, str], ScheduledJob] = {}
        self._resources: dict[str, str] = {}
        self._parameters: dict[str, str] = {}
        self._unregister: list[Callable[[], None]] = []
        self._websocket: WebSocketGateway | None = None
        self._streams: StreamPoller | None = None
        self._clock_history: list[list[int]] = []

    # ------------------------------------------------------------------- state
    @property
    def running(self) -> bool:
        """Whether :meth:`start` completed and :meth:`stop` was not called since."""
        return self._gateway is not None

    def _require(self) -> None:
        if not self.running:
            raise RuntimeError("the local stack is not running: call start() first")

    @property
    def port(self) -> int:
        """The HTTP API's port: the bound one while running, else the one asked for."""
        return self._gateway.port if self._gateway is not None else self._requested_port

    @property
    def endpoint(self) -> str:
        """Base URL of the HTTP API, e.g. ``http://127.0.0.1:54321``."""
        self._require()
        assert self._gateway is not None
        return self._gateway.url

    @property
    def ws_endpoint(self) -> str | None:
        """The notification channel's WebSocket URL (``ws://127.0.0.1:<port>``), None if the
        template has no WebSocket API; ``GET /v1/health`` states it as ``ws_endpoint``."""
        self._require()
        return self._websocket.url if self._websocket is not None else None

    @property
    def websocket(self) -> WebSocketGateway | None:
        """The local WebSocket API (its counters: connections opened, open now)."""
        return self._websocket

    @property
    def aws_endpoint(self) -> str:
        """URL of the moto server (DynamoDB, S3, ...)."""
        self._require()
        assert self._moto is not None
        return self._moto.url

    @property
    def resources(self) -> Mapping[str, str]:
        """Logical id → physical name of every table and bucket."""
        return MappingProxyType(self._resources)

    @property
    def parameters(self) -> Mapping[str, str]:
        """The parameter values in use (including generated secrets)."""
        return MappingProxyType(self._parameters)

    @property
    def environment(self) -> Mapping[str, str]:
        """The variables this stack set in ``os.environ``."""
        return MappingProxyType(self._env.values if self._env else {})

    @property
    def functions(self) -> Mapping[str, FunctionRuntime]:
        """Logical id → the function's in-process runtime."""
        return MappingProxyType(self._runtimes)

    # --------------------------------------------------------------- lifecycle
    def start(self) -> LocalStack:
        """Start moto, create the resources, set the environment, serve the API."""
        with self._lock:
            if self.running:
                return self
            template = load_template(self.template_path)
            parameters = resolve_parameters(template, self.parameter_overrides)
            resolver = Resolver(template, parameters, stack_name=self.stack_name, region=REGION)
            self.template, self._parameters = template, parameters
            try:
                self._start(template, resolver)
            except BaseException:
                self.stop()
                raise
            log.info("CirrusMQ local stack on %s (moto %s)", self.endpoint, self.aws_endpoint)
            return self

    def _start(self, template: Template, resolver: Resolver) -> None:
        functions = [
            resolver.function(fn)
            for fn in template.functions.values()
            if fn.condition is None or resolver.condition(fn.condition)
        ]
        runtimes = {
            fn.logical_id: FunctionRuntime(
                fn,
                resolver.physical_name(fn.logical_id),
                output=self.telemetry.sink(fn.logical_id),
            )
            for fn in functions
        }
        jobs = {
            (fn.logical_id, event.event_name): ScheduledJob(
                runtimes[fn.logical_id],
                event,
                None if event.input is None else resolver.text(event.input),
            )
            for fn in functions
            for event in fn.schedules
        }
        self._moto = MotoServer(
            host="127.0.0.1",
            data_dir=None if self.data_dir is None else self.data_dir / "moto",
        ).start()
        _RUNNING.add(id(self))
        self._restore_clock()
        # the EMF datapoints also go to moto's CloudWatch, where the API reads them back
        self.telemetry.forwarder = MetricForwarder(self.boto3_client("cloudwatch"))
        self._resources = create_resources(
            self.boto3_client("dynamodb"),
            self.boto3_client("s3"),
            template,
            resolver,
            kms=self.boto3_client("kms"),
        )
        directory_buckets = [
            self._resources[b.logical_id]
            for b in template.buckets.values()
            if template.resource_type(b.logical_id) == DIRECTORY_BUCKET_TYPE
            and b.logical_id in self._resources
        ]
        if directory_buckets:  # moto has none: S3's rules for them, enforced in this process
            self._unregister.append(enforce_directory_bucket_rules(*directory_buckets))
        self._bootstrap_key()
        values = self._environment(functions, resolver)
        if template.websocket_routes:
            self._websocket = self._start_websocket(template, runtimes)
            values[WEBSOCKET_URL_VAR] = self._websocket.url
            values[CALLBACK_URL_VAR] = self._websocket.callback_url
        for runtime in runtimes.values():
            runtime.environment = values
        self._env = EnvironmentPatch(values)
        if EnvironmentPatch.active_count():
            log.warning(
                "another local stack runs in this process: os.environ holds the newest "
                "stack's variables until it stops (CirrusMQ's handlers read their own "
                "stack's; handlers of other templates that read os.environ do not)"
            )
        self._env.apply()
        self._runtimes, self._jobs = runtimes, jobs
        if self.preload_handlers:
            for runtime in runtimes.values():
                runtime.preload()
        routes = front_door_routes(functions, runtimes)
        self._gateway = Gateway(
            routes,
            host=self.host,
            port=self._requested_port,
            local_routes=LocalRoutes(self.telemetry),
        ).start()
        sources = [
            StreamSource(
                f"{fn.logical_id}.{event.event_name}",
                self._resources[event.table],
                functools.partial(_invoke, runtimes[fn.logical_id]),
                event.batch_size,
                event.patterns,
                event.retry_attempts,
                event.report_batch_item_failures,
            )
            for fn in functions
            for event in fn.streams
            if event.table in self._resources
        ]
        if sources:
            self._streams = StreamPoller(
                self.boto3_client("dynamodb"), self.boto3_client("dynamodbstreams"), sources
            ).start()
        self._expiry = self._make_expiry(template)
        if self.expire_interval is not None:
            self._expiry.start(self.expire_interval)
        if self.schedules_enabled:
            runner = self._runner = ScheduleRunner(list(jobs.values()))
            runner.start(at_once=START_AT_ONCE)
            for logical_id in WOKEN_BY_INVOKE:
                if logical_id in runtimes:
                    self._unregister.append(
                        register_local(
                            runtimes[logical_id].physical_name,
                            functools.partial(runner.fire_soon, logical_id),
                        )
                    )

    def _start_websocket(
        self, template: Template, runtimes: Mapping[str, FunctionRuntime]
    ) -> WebSocketGateway:
        routes = {
            key: (lambda _route, event, runtime=runtimes[fn]: runtime.invoke(event))
            for key, fn in template.websocket_routes.items()
            if fn in runtimes
        }
        return WebSocketGateway(routes, host=_loopback(self.host)).start()

    def _bootstrap_key(self) -> None:
        """Store :attr:`credentials` as an admin access key (replacing one of that id)."""
        table = self._resources.get("AccessKeysTable")
        key = self._resources.get("AccessKeySecretsKey")
        if table is None or key is None:
            log.debug("no AccessKeysTable / AccessKeySecretsKey: no bootstrap access key")
            return
        from cirrusmq_broker.rules.permissions import ADMIN
        from cirrusmq_broker.services.access_keys import AccessKeysService
        from cirrusmq_broker.storage.access_keys import AccessKeyStore, SecretCipher

        service = AccessKeysService(
            store=AccessKeyStore(self.boto3_client("dynamodb"), table),
            cipher=SecretCipher(self.boto3_client("kms"), key),
            clock=clock.now_ms,
        )
        service.put(
            self.credentials.access_key,
            self.credentials.secret_key,
            ADMIN,
            "local stack bootstrap admin key",
        )
        log.info("admin access key: %s", self.credentials.access_key)

    def _make_expiry(self, template: Template) -> Expiry:
        assert self._moto is not None
        s3 = self.boto3_client("s3")

        def lifecycle_rules(bucket: str) -> list[dict[str, Any]]:
            try:
                return list(s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"])
            except s3.exceptions.ClientError:
                return []  # no lifecycle configuration (any more)

        ttl_tables = [
            self._resources[table.logical_id]
            for table in template.tables.values()
            if table.time_to_live is not None and table.logical_id in self._resources
        ]
        buckets = [self._resources[b] for b in template.buckets if b in self._resources]
        return Expiry(
            self._moto.url, ttl_tables, buckets, lifecycle_rules, history=self._clock_history
        )

    def _restore_clock(self) -> None:
        """Move the broker clock to the offset kept in the data dir (it never goes back)."""
        self._clock_history = []
        path = None if self.data_dir is None else self.data_dir / CLOCK_FILE
        if path is None or not path.exists():
            return
        state = json.loads(path.read_text())
        ahead = int(state["offset_ms"]) - clock.offset_ms()
        if ahead > 0:
            clock.advance((ahead + 0.5) / 1000)
        self._clock_history = [list(change) for change in state.get("history") or ()]

    def _save_clock(self) -> None:
        if self.data_dir is None or self._expiry is None:
            return
        path = self.data_dir / CLOCK_FILE
        temporary = path.with_suffix(".tmp")
        state = {"offset_ms": clock.offset_ms(), "history": self._expiry.history}
        with temporary.open("w") as file:
            json.dump(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)

    def _environment(self, functions: list[Function], resolver: Resolver) -> dict[str, str]:
        assert self._moto is not None
        values: dict[str, str] = {}
        for fn in functions:
            for key, value in resolver.environment(fn).items():
                if key in values and values[key] != value:
                    log.warning(
                        "%s sets %s differently from another function; handlers share one "
                        "process environment locally, %s's value wins",
                        fn.logical_id,
                        key,
                        fn.logical_id,
                    )
                values[key] = value
        values.update(LOCAL_VARIABLES)
        values[ENDPOINT_VAR] = self._moto.url
        values[REGION_VAR] = REGION
        return values

    def stop(self) -> None:
        """Stop schedules, expiry and gateway, put the environment back, stop moto, set the
        broker clock back to wall time; idempotent."""
        with self._lock:
            for undo in self._unregister:
                undo()
            if self._streams is not None:
                self._streams.stop()
            if self._websocket is not None:
                self._websocket.stop()
            if self._runner is not None:
                self._runner.stop()
            if self._expiry is not None:
                self._expiry.stop()
            if self._gateway is not None:
                self._gateway.stop()
            for runtime in self._runtimes.values():
                runtime.unload()
            if self._env is not None:
                self._env.restore()
            if self.telemetry.forwarder is not None:
                self.telemetry.forwarder.stop()
                self.telemetry.forwarder = None
            if self._moto is not None:
                self._moto.stop()
                _RUNNING.discard(id(self))
                if not _RUNNING:  # the broker clock is per process: shared by every stack
                    clock.reset()
            self._reset()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ helpers
    def boto3_client(self, service: str, **kwargs: Any) -> Any:
        """A boto3 client for ``service`` on the moto server (dummy credentials, us-east-1)."""
        if self._moto is None:
            raise RuntimeError("the local stack is not running: call start() first")
        import boto3

        session = boto3.session.Session(region_name=REGION, **DUMMY_CREDENTIALS)
        return session.client(service, endpoint_url=self._moto.url, **kwargs)

    def invoke(self, function: str, event: Any) -> Any:
        """Invoke a function (by logical id) in-process with ``event``; return its result."""
        self._require()
        if function not in self._runtimes:
            raise KeyError(f"no function {function!r}; known: {', '.join(sorted(self._runtimes))}")
        return self._runtimes[function].invoke(event)

    def run_schedule(self, function: str, event: str) -> Any:
        """Fire one Schedule event (function logical id + event name) now, synchronously."""
        self._require()
        job = self._jobs.get((function, event))
        if job is None:
            known = ", ".join(f"{f}/{e}" for f, e in sorted(self._jobs))
            raise KeyError(f"no schedule {function}/{event}; known: {known or 'none'}")
        try:
            return job.run()
        finally:  # what it emitted can be read back from CloudWatch once this returns
            self.flush_metrics()

    def flush_metrics(self) -> None:
        """Wait until the datapoints emitted so far reached moto's CloudWatch."""
        if self.telemetry.forwarder is not None:
            self.telemetry.forwarder.flush()

    def advance_time(self, seconds: float) -> dict[str, int]:
        """Move the stack's time forward by ``seconds`` and let what is due happen.

        Moves the broker clock (:func:`cirrusmq_broker.clock.advance`; handlers, leases and
        invisibility, retention and message delays read it), then runs full passes of the
        TTL and lifecycle expiry (items whose TTL is ``<=`` the new time and objects past
        their retention tier are deleted), then every schedule that became due (once, even
        after a jump of many periods). Returns when all of that is done, with the numbers
        deleted: ``{"items": n, "objects": m}``. :meth:`stop` sets the clock back.
        """
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._require()
            assert self._expiry is not None
            before = wall_ms()
            clock.advance(seconds)  # wakes runs parked on the broker clock (delays)
            self._expiry.note_advance(before)
            self._save_clock()
            deleted = self._expiry.run(full=True)
            clock.settle()
            if self._runner is not None:
                self._runner.run_due()
            return deleted

    def expire_now(self) -> dict[str, int]:
        """Run full TTL and lifecycle passes now (as the timer does in slices); return the
        numbers deleted: ``{"items": n, "objects": m}``."""
        self._require()
        assert self._expiry is not None
        return self._expiry.run(full=True)

    # ------------------------------------------------------------------ spark
    def spark_options(self) -> dict[str, str]:
        """Options of the ``cirrusmq`` Spark data source that point at this running stack:
        ``spark.read.format("cirrusmq").options(**stack.spark_options()).option("topic", t)``.

        They carry the moto endpoint, dummy keys, the bucket and table names, and the broker
        clock's current offset (after :meth:`advance_time`, call it again)."""
        self._require()
        names = {
            "bucket": "MessageBucket",
            "batchBucket": "BatchDirectoryBucket",  # only with BatchStorage=express
            "logIndexTable": "LogIndexTable",
            "queueHeadsTable": "QueueHeadsTable",
            "topicsTable": "TopicsTable",
            "groupsTable": "GroupsTable",
        }
        options = {o: self._resources[r] for o, r in names.items() if r in self._resources}
        return {
            **options,
            "endpoint": self.aws_endpoint,
            "region": REGION,
            "accessKeyId": DUMMY_CREDENTIALS["aws_access_key_id"],
            "secretAccessKey": DUMMY_CREDENTIALS["aws_secret_access_key"],
            "clockOffsetMs": str(clock.offset_ms()),
        }

    # ------------------------------------------------------------------ end spark

    def __repr__(self) -> str:
        where = self.endpoint if self.running else "stopped"
        return f"LocalStack({self.template_path}, {where})"
