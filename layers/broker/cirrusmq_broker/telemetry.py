"""Logs, metrics and traces of every function: Powertools Logger, Metrics (EMF) and Tracer.

- :data:`logger` writes one JSON object per line. Per-invocation keys (request id, access key
  id, route, correlation id) are set with :func:`bind` and live in a context variable
  (Powertools' thread-safe keys), never in the shared formatter: the local stack runs several
  function environments in one process, each request on its own thread.
- :func:`emit_metrics` writes one EMF document (namespace :data:`NAMESPACE`) per call on the
  invocation's own :class:`EphemeralMetrics`: Powertools' ``Metrics`` keeps its metric and
  dimension sets on the class, shared by every instance in the process, so two requests in
  flight would flush each other's dimensions. EMF is a log line: no AWS call.
- :data:`tracer` is X-Ray (``Tracing: Active`` in the template), created only where tracing
  is on: in Lambda (``LAMBDA_TASK_ROOT`` set), not under ``sam local`` (``AWS_SAM_LOCAL``),
  unless ``POWERTOOLS_TRACE_DISABLED`` is true — Powertools' own rule. Elsewhere it is None
  and :func:`traced` / :func:`annotate` do nothing, so the X-Ray SDK (~0.5 s to import) is
  never loaded by the local stack or the tests.

Every line goes through :func:`write_line`: to stdout (CloudWatch Logs on AWS), or to the sink
:func:`capture` installed for the current invocation (the local stack keeps them).
"""

from __future__ import annotations

import contextvars
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

__all__ = [
    "NAMESPACE",
    "SERVICE",
    "MetricUnit",
    "bind",
    "capture",
    "current_keys",
    "emit_metrics",
    "logger",
    "annotate",
    "traced",
    "tracer",
    "write_line",
]

NAMESPACE = "CirrusMQ"
"""The CloudWatch namespace of every metric the functions emit."""
SERVICE = "cirrusmq"
"""The ``service`` log key and metric dimension."""
LOGGER_NAME = "cirrusmq_broker"
"""The Python logger Powertools configures: the broker's module loggers (``__name__``) are
its children, so their records come out as JSON too; the SDK's (``cirrusmq.*``) are not."""

Sink = Callable[[str], None]
_sink: contextvars.ContextVar[Sink | None] = contextvars.ContextVar("cirrusmq_sink", default=None)


def write_line(text: str) -> None:
    """Write one log line (a JSON document) where this invocation's output goes."""
    sink = _sink.get()
    if sink is not None:
        sink(text)
        return
    stream = sys.stdout
    stream.write(text + "\n")
    stream.flush()


@contextmanager
def capture(sink: Sink) -> Iterator[None]:
    """Send the lines written in this context (this thread / task) to ``sink``."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


class _LineStream:
    """A text stream for the logging handler: whole records go to :func:`write_line`."""

    def write(self, text: str) -> int:
        line = text.rstrip("\n")
        if line:
            write_line(line)
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered."""


logger = Logger(service=LOGGER_NAME, logger_handler=logging.StreamHandler(_LineStream()))
logger.append_keys(service=SERVICE)  # constant for the process: safe to keep on the formatter


def tracing_enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether X-Ray tracing is on for this process (Powertools' rule, read from ``environ``,
    default ``os.environ``)."""
    env = os.environ if environ is None else environ
    disabled = env.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower()
    if disabled in {"1", "true", "y", "yes", "t", "on"}:
        return False
    return bool(env.get("LAMBDA_TASK_ROOT")) and not env.get("AWS_SAM_LOCAL")


tracer: Tracer | None = Tracer(service=SERVICE) if tracing_enabled() else None


def bind(**keys: Any) -> None:
    """Start this invocation's log keys afresh with ``keys`` (``None`` values left out)."""
    logger.thread_safe_clear_keys()
    logger.thread_safe_append_keys(**{k: v for k, v in keys.items() if v is not None})


def current_keys() -> dict[str, Any]:
    """A copy of this invocation's log keys."""
    return dict(logger.thread_safe_get_current_keys())


def add_keys(**keys: Any) -> None:
    """Add log keys to this invocation's (``None`` values left out)."""
    logger.thread_safe_append_keys(**{k: v for k, v in keys.items() if v is not None})


def emit_metrics(
    values: Mapping[str, tuple[str, float]],
    dimension_sets: list[dict[str, str]],
) -> dict[str, Any] | None:
    """Write one EMF document: ``values`` is name → (unit, value), recorded under each of
    ``dimension_sets`` (``service`` is added to each); returns the document (None if no
    value)."""
    if not values:
        return None
    metrics = EphemeralMetrics(namespace=NAMESPACE, service=SERVICE)
    first, *others = dimension_sets or [{}]
    for name, value in first.items():
        metrics.add_dimension(name, value)
    for dimensions in others:
        metrics.add_dimensions(service=SERVICE, **dimensions)
    for name, (unit, value) in values.items():
        metrics.add_metric(name=name, unit=unit, value=value)
    document = metrics.serialize_metric_set()
    write_line(json.dumps(document, separators=(",", ":")))
    return document


Handler = Callable[[Any, Any], Any]


def traced(handler: Handler) -> Handler:
    """X-Ray around a Lambda handler; the response is not recorded (it holds messages)."""
    if tracer is None:
        return handler
    return tracer.capture_lambda_handler(handler, capture_response=False)


def annotate(**annotations: str) -> None:
    """X-Ray annotations (searchable) on the current trace; nothing without tracing."""
    if tracer is None:
        return
    for key, value in annotations.items():
        tracer.put_annotation(key, value)


def scheduled(kind: str) -> Callable[[Handler], Handler]:
    """Decorate a scheduled function's handler: traced, its run logged (``run`` with the
    task, duration and outcome) and measured (``Runs``, ``RunErrors``, ``RunDuration`` by
    ``RequestKind`` = ``kind``)."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        def run(event: Any, context: Any) -> Any:
            started = time.monotonic()
            task = event.get("task") if isinstance(event, dict) else None
            bind(
                function_request_id=getattr(context, "aws_request_id", None),
                request_kind=kind,
                task=task,
            )
            result: Any = None
            failed = True
            try:
                result = handler(event, context)
                failed = False
                return result
            finally:
                duration_ms = round((time.monotonic() - started) * 1000, 1)
                outcome = result if isinstance(result, dict) else None
                if failed:
                    logger.exception("run failed", extra={"duration_ms": duration_ms})
                else:
                    logger.info("run", extra={"duration_ms": duration_ms, "result": outcome})
                emit_metrics(
                    {
                        "Runs": (MetricUnit.Count, 1),
                        "RunErrors": (MetricUnit.Count, int(failed)),
                        "RunDuration": (MetricUnit.Milliseconds, duration_ms),
                    },
                    [{"RequestKind": kind}],
                )

        return traced(run)

    return decorate
