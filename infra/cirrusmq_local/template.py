"""Typed view of the SAM template: parameters, tables, buckets, functions and their events.

Values that may hold intrinsic functions (``{"Ref": ...}``) are kept raw here; they are
turned into local values by :class:`cirrusmq_local.resolver.Resolver`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cirrusmq_local.cfn_yaml import load_yaml

__all__ = [
    "Bucket",
    "Function",
    "HttpRoute",
    "Parameter",
    "ScheduleEvent",
    "StreamEvent",
    "Table",
    "Template",
    "TemplateError",
    "TimeToLive",
    "load_template",
    "merge_globals",
]

TABLE_TYPE = "AWS::DynamoDB::Table"
BUCKET_TYPE = "AWS::S3::Bucket"
DIRECTORY_BUCKET_TYPE = "AWS::S3Express::DirectoryBucket"
"""Created locally as an ordinary moto bucket with directory_buckets.py's rules enforced."""
FUNCTION_TYPE = "AWS::Serverless::Function"
KMS_KEY_TYPE = "AWS::KMS::Key"


class TemplateError(ValueError):
    """The template uses something the local stack cannot understand or emulate."""


@dataclass(frozen=True)
class Parameter:
    """A template parameter (CloudFormation parameters are strings; numbers are kept as text)."""

    name: str
    type: str
    default: str | None = None
    no_echo: bool = False
    description: str = ""
    min_length: int | None = None
    max_length: int | None = None
    min_value: float | None = None
    max_value: float | None = None
    allowed_values: tuple[str, ...] = ()
    allowed_pattern: str | None = None

    def validate(self, value: str) -> None:
        """Raise :class:`TemplateError` if ``value`` breaks the parameter's constraints."""
        import re

        shown = "****" if self.no_echo else repr(value)
        if self.min_length is not None and len(value) < self.min_length:
            raise TemplateError(
                f"parameter {self.name} is shorter than {self.min_length} characters"
            )
        if self.max_length is not None and len(value) > self.max_length:
            raise TemplateError(
                f"parameter {self.name} is longer than {self.max_length} characters"
            )
        if self.allowed_values and value not in self.allowed_values:
            raise TemplateError(
                f"parameter {self.name}={shown} is not one of {', '.join(self.allowed_values)}"
            )
        if self.allowed_pattern is not None and not re.fullmatch(self.allowed_pattern, value):
            raise TemplateError(
                f"parameter {self.name}={shown} does not match {self.allowed_pattern}"
            )
        if self.type == "Number":
            try:
                number = float(value)
            except ValueError:
                raise TemplateError(f"parameter {self.name}={shown} is not a number") from None
            if self.min_value is not None and number < self.min_value:
                raise TemplateError(f"parameter {self.name}={shown} is below {self.min_value:g}")
            if self.max_value is not None and number > self.max_value:
                raise TemplateError(f"parameter {self.name}={shown} is above {self.max_value:g}")


@dataclass(frozen=True)
class TimeToLive:
    """A table's ``TimeToLiveSpecification``."""

    attribute_name: str
    enabled: bool = True


@dataclass(frozen=True)
class Table:
    """An ``AWS::DynamoDB::Table`` (``properties`` is the raw CloudFormation block)."""

    logical_id: str
    attribute_definitions: tuple[Mapping[str, Any], ...]
    key_schema: tuple[Mapping[str, Any], ...]
    global_secondary_indexes: tuple[Mapping[str, Any], ...] = ()
    local_secondary_indexes: tuple[Mapping[str, Any], ...] = ()
    billing_mode: str = "PROVISIONED"
    time_to_live: TimeToLive | None = None
    table_name: Any = None
    condition: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Bucket:
    """An ``AWS::S3::Bucket`` (``properties`` is the raw CloudFormation block)."""

    logical_id: str
    lifecycle_rules: tuple[Mapping[str, Any], ...] = ()
    encryption: Mapping[str, Any] | None = None
    public_access_block: Mapping[str, Any] | None = None
    versioning: Mapping[str, Any] | None = None
    bucket_name: Any = None
    condition: str | None = None
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpRoute:
    """An ``HttpApi`` event. ``method`` is upper-case, ``ANY`` matches every method;
    ``path`` is ``$default`` for the catch-all route."""

    event_name: str
    method: str
    path: str

    @property
    def route_key(self) -> str:
        """API Gateway's route key, e.g. ``POST /v1/topics/{topic}`` (or ``$default``)."""
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class ScheduleEvent:
    """A ``Schedule``/``ScheduleV2`` event: ``expression`` is ``rate(...)`` or ``cron(...)``;
    ``input`` is the raw ``Input`` (a JSON string, possibly an intrinsic) or ``None``."""

    event_name: str
    expression: str
    input: Any = None
    enabled: bool = True
    name: str | None = None


@dataclass(frozen=True)
class StreamEvent:
    """A ``DynamoDB`` event: the function runs on the stream of ``table`` (a logical id)."""

    event_name: str
    table: str
    batch_size: int = 100
    patterns: tuple[Mapping[str, Any], ...] = ()
    """``FilterCriteria`` patterns (a record passes if one matches; none: all pass)."""
    retry_attempts: int = 0
    """``MaximumRetryAttempts`` (-1 on AWS: until the record expires; 0 here: no retry)."""
    report_batch_item_failures: bool = False
    """``FunctionResponseTypes`` lists ``ReportBatchItemFailures``."""


@dataclass(frozen=True)
class Function:
    """An ``AWS::Serverless::Function`` with ``Globals.Function`` merged in."""

    logical_id: str
    code_uri: Path
    handler: str
    runtime: str | None
    timeout: int
    memory_size: Any
    """An integer, or an intrinsic (``{"Ref": parameter}``) the stack resolves."""
    environment: Mapping[str, Any]
    http_routes: tuple[HttpRoute, ...] = ()
    schedules: tuple[ScheduleEvent, ...] = ()
    streams: tuple[StreamEvent, ...] = ()
    function_name: Any = None
    condition: str | None = None
    function_url: bool = False
    """The function has a ``FunctionUrlConfig``: a Lambda function URL serves it."""


@dataclass(frozen=True)
class Template:
    """The parts of a SAM template the local stack emulates."""

    path: Path
    parameters: Mapping[str, Parameter]
    tables: Mapping[str, Table]
    buckets: Mapping[str, Bucket]
    functions: Mapping[str, Function]
    resources: Mapping[str, Mapping[str, Any]]
    conditions: Mapping[str, Any] = field(default_factory=dict)
    mappings: Mapping[str, Any] = field(default_factory=dict)
    websocket_routes: Mapping[str, str] = field(default_factory=dict)
    """Route key (``$connect``, ``wait``, ...) → the logical id of the function behind it,
    for the template's WebSocket API (``AWS::ApiGatewayV2`` resources)."""

    def resource_type(self, logical_id: str) -> str | None:
        """The ``Type`` of a resource, or ``None`` if there is no such resource."""
        resource = self.resources.get(logical_id)
        return None if resource is None else resource.get("Type")


# SAM defaults when neither the function nor Globals say otherwise.
DEFAULT_TIMEOUT = 3
DEFAULT_MEMORY = 128


def merge_globals(global_value: Any, local_value: Any) -> Any:
    """SAM's Globals merge: maps merge recursively, lists concatenate, scalars: local wins."""
    if isinstance(global_value, dict) and isinstance(local_value, dict):
        if _is_intrinsic(global_value) or _is_intrinsic(local_value):
            return local_value
        merged = dict(global_value)
        for key, value in local_value.items():
            merged[key] = merge_globals(global_value[key], value) if key in global_value else value
        return merged
    if isinstance(global_value, list) and isinstance(local_value, list):
        return [*global_value, *local_value]
    return local_value


def _is_intrinsic(value: Mapping[str, Any]) -> bool:
    if len(value) != 1:
        return False
    key = next(iter(value))
    return key in {"Ref", "Condition"} or key.startswith("Fn::")


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TemplateError(f"{what} must be a literal integer locally, got {value!r}")
    try:
        return int(value)
    except ValueError:
        raise TemplateError(f"{what} must be an integer, got {value!r}") from None


def _int_or_intrinsic(value: Any, what: str) -> Any:
    """A literal integer, or an intrinsic kept as it is for the resolver."""
    if isinstance(value, Mapping) and _is_intrinsic(value):
        return dict(value)
    return _int(value, what)


def _as_tuple(value: Any, what: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TemplateError(f"{what} must be a list")
    return tuple(value)


def _parse_parameter(name: str, raw: Mapping[str, Any]) -> Parameter:
    def _opt_int(key: str) -> int | None:
        return None if key not in raw else _int(raw[key], f"parameter {name} {key}")

    def _opt_float(key: str) -> float | None:
        return None if key not in raw else float(raw[key])

    default = raw.get("Default")
    if isinstance(default, list):
        default = ",".join(str(item) for item in default)
    return Parameter(
        name=name,
        type=str(raw.get("Type", "String")),
        default=None if default is None else _scalar_text(default),
        no_echo=_scalar_text(raw.get("NoEcho", False)).lower() == "true",
        description=str(raw.get("Description", "")).strip(),
        min_length=_opt_int("MinLength"),
        max_length=_opt_int("MaxLength"),
        min_value=_opt_float("MinValue"),
        max_value=_opt_float("MaxValue"),
        allowed_values=tuple(_scalar_text(v) for v in raw.get("AllowedValues", ())),
        allowed_pattern=raw.get("AllowedPattern"),
    )


def _scalar_text(value: Any) -> str:
    """CloudFormation's text form of a scalar (booleans are ``true``/``false``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_table(logical_id: str, resource: Mapping[str, Any]) -> Table:
    props = resource.get("Properties") or {}
    ttl_raw = props.get("TimeToLiveSpecification")
    ttl = None
    if ttl_raw:
        enabled = ttl_raw.get("Enabled", False)
        ttl = TimeToLive(
            attribute_name=ttl_raw.get("AttributeName", ""),
            enabled=_scalar_text(enabled).lower() == "true",
        )
    if "KeySchema" not in props:
        raise TemplateError(f"table {logical_id} has no KeySchema")
    return Table(
        logical_id=logical_id,
        attribute_definitions=_as_tuple(props.get("AttributeDefinitions"), f"{logical_id} attrs"),
        key_schema=_as_tuple(props.get("KeySchema"), f"{logical_id} KeySchema"),
        global_secondary_indexes=_as_tuple(
            props.get("GlobalSecondaryIndexes"), f"{logical_id} GSIs"
        ),
        local_secondary_indexes=_as_tuple(props.get("LocalSecondaryIndexes"), f"{logical_id} LSIs"),
        billing_mode=str(props.get("BillingMode", "PROVISIONED")),
        time_to_live=ttl,
        table_name=props.get("TableName"),
        condition=resource.get("Condition"),
        properties=props,
    )


def _parse_bucket(logical_id: str, resource: Mapping[str, Any]) -> Bucket:
    props = resource.get("Properties") or {}
    lifecycle = props.get("LifecycleConfiguration") or {}
    return Bucket(
        logical_id=logical_id,
        lifecycle_rules=_as_tuple(lifecycle.get("Rules"), f"{logical_id} lifecycle rules"),
        encryption=props.get("BucketEncryption"),
        public_access_block=props.get("PublicAccessBlockConfiguration"),
        versioning=props.get("VersioningConfiguration"),
        bucket_name=props.get("BucketName"),
        condition=resource.get("Condition"),
        properties=props,
    )


_ANY_METHODS = {"ANY", "*", "X-AMAZON-APIGATEWAY-ANY-METHOD"}


def _parse_events(
    logical_id: str, events: Mapping[str, Any]
) -> tuple[list[HttpRoute], list[ScheduleEvent], list[StreamEvent]]:
    routes: list[HttpRoute] = []
    schedules: list[ScheduleEvent] = []
    streams: list[StreamEvent] = []
    for name, event in (events or {}).items():
        kind = event.get("Type")
        props = event.get("Properties") or {}
        if kind == "HttpApi":
            path, method = props.get("Path"), props.get("Method")
            if path is None and method is None:
                routes.append(HttpRoute(name, "ANY", "$default"))
                continue
            if not isinstance(path, str) or not isinstance(method, str):
                raise TemplateError(f"{logical_id}.{name}: HttpApi Path and Method must be text")
            method = method.upper()
            routes.append(HttpRoute(name, "ANY" if method in _ANY_METHODS else method, path))
        elif kind in {"Schedule", "ScheduleV2"}:
            expression = props.get("Schedule" if kind == "Schedule" else "ScheduleExpression")
            if not isinstance(expression, str):
                raise TemplateError(f"{logical_id}.{name}: schedule expression must be text")
            enabled = props.get("Enabled", True)
            state = str(props.get("State", "ENABLED")).upper()
            schedules.append(
                ScheduleEvent(
                    event_name=name,
                    expression=expression.strip(),
                    input=props.get("Input"),
                    enabled=_scalar_text(enabled).lower() == "true" and state == "ENABLED",
                    name=props.get("Name"),
                )
            )
        elif kind == "DynamoDB":
            table = _get_att_resource(props.get("Stream"))
            if table is None:
                raise TemplateError(
                    f"{logical_id}.{name}: Stream must be !GetAtt <table>.StreamArn"
                )
            size = _int(props.get("BatchSize", 100), f"{logical_id}.{name} BatchSize")
            filters = (props.get("FilterCriteria") or {}).get("Filters") or []
            patterns = tuple(json.loads(f["Pattern"]) for f in filters if "Pattern" in f)
            retries = _int(props.get("MaximumRetryAttempts", 0), f"{logical_id}.{name} retries")
            reports = "ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or [])
            streams.append(StreamEvent(name, table, size, patterns, max(retries, 0), reports))
        # Other event sources (SQS, S3, ...) are not emulated: they are simply not wired.
    return routes, schedules, streams


def _get_att_resource(value: Any) -> str | None:
    """The logical id in ``!GetAtt Resource.Attribute`` (either spelling), else None."""
    if not isinstance(value, Mapping) or "Fn::GetAtt" not in value:
        return None
    target = value["Fn::GetAtt"]
    if isinstance(target, str):
        target = target.split(".", 1)
    return str(target[0]) if isinstance(target, list) and target else None


def _sub_text(value: Any) -> str:
    if isinstance(value, Mapping) and "Fn::Sub" in value:
        sub = value["Fn::Sub"]
        return sub if isinstance(sub, str) else str(sub[0])
    return value if isinstance(value, str) else ""


def _parse_websocket_routes(resources: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Route key → function, following Route.Target (``integrations/${Integration}``) to
    the integration's ``IntegrationUri`` (``...${Function.Arn}/invocations``)."""
    import re

    routes: dict[str, str] = {}
    for resource in resources.values():
        if resource.get("Type") != "AWS::ApiGatewayV2::Route":
            continue
        props = resource.get("Properties") or {}
        target = re.search(r"\$\{(\w+)\}", _sub_text(props.get("Target")))
        integration = resources.get(target.group(1)) if target else None
        if integration is None:
            continue
        uri = _sub_text((integration.get("Properties") or {}).get("IntegrationUri"))
        function = re.search(r"\$\{(\w+)\.Arn\}", uri)
        if function and isinstance(props.get("RouteKey"), str):
            routes[props["RouteKey"]] = function.group(1)
    return routes


def _parse_function(
    logical_id: str, resource: Mapping[str, Any], globals_: Mapping[str, Any], root: Path
) -> Function:
    props = merge_globals(dict(globals_), dict(resource.get("Properties") or {}))
    code_uri = props.get("CodeUri")
    if not isinstance(code_uri, str) or code_uri.startswith("s3://"):
        raise TemplateError(f"function {logical_id}: CodeUri must be a local directory locally")
    handler = props.get("Handler")
    if not isinstance(handler, str) or "." not in handler:
        raise TemplateError(f"function {logical_id}: Handler must look like 'module.function'")
    environment = (props.get("Environment") or {}).get("Variables") or {}
    routes, schedules, streams = _parse_events(logical_id, props.get("Events") or {})
    return Function(
        logical_id=logical_id,
        code_uri=(root / code_uri).resolve(),
        handler=handler,
        runtime=props.get("Runtime"),
        timeout=_int(props.get("Timeout", DEFAULT_TIMEOUT), f"{logical_id} Timeout"),
        memory_size=_int_or_intrinsic(
            props.get("MemorySize", DEFAULT_MEMORY), f"{logical_id} MemorySize"
        ),
        environment=dict(environment),
        http_routes=tuple(routes),
        schedules=tuple(schedules),
        streams=tuple(streams),
        function_name=props.get("FunctionName"),
        condition=resource.get("Condition"),
        function_url=props.get("FunctionUrlConfig") is not None,
    )


def parse_template(data: Mapping[str, Any], path: Path) -> Template:
    """Build a :class:`Template` from already-parsed template data."""
    if not isinstance(data, Mapping) or not isinstance(data.get("Resources"), Mapping):
        raise TemplateError(f"{path}: not a CloudFormation template (no Resources)")
    root = path.parent
    resources: dict[str, Mapping[str, Any]] = dict(data["Resources"])
    globals_function = ((data.get("Globals") or {}).get("Function")) or {}
    tables: dict[str, Table] = {}
    buckets: dict[str, Bucket] = {}
    functions: dict[str, Function] = {}
    for logical_id, resource in resources.items():
        kind = resource.get("Type")
        if kind == TABLE_TYPE:
            tables[logical_id] = _parse_table(logical_id, resource)
        elif kind in (BUCKET_TYPE, DIRECTORY_BUCKET_TYPE):
            buckets[logical_id] = _parse_bucket(logical_id, resource)
        elif kind == FUNCTION_TYPE:
            functions[logical_id] = _parse_function(logical_id, resource, globals_function, root)
    parameters = {
        name: _parse_parameter(name, raw) for name, raw in (data.get("Parameters") or {}).items()
    }
    return Template(
        path=path,
        parameters=parameters,
        tables=tables,
        buckets=buckets,
        functions=functions,
        resources=resources,
        conditions=dict(data.get("Conditions") or {}),
        mappings=dict(data.get("Mappings") or {}),
        websocket_routes=_parse_websocket_routes(resources),
    )


def load_template(path: str | Path) -> Template:
    """Read and parse a SAM template file."""
    path = Path(path).resolve()
    try:
        data = load_yaml(path)
    except FileNotFoundError:
        raise TemplateError(f"template not found: {path}") from None
    return parse_template(data, path)
