"""Load a function's handler from its CodeUri and invoke it in-process, Lambda style."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import logging
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from cirrusmq_broker.settings import function_environment
from cirrusmq_broker.telemetry import capture

from cirrusmq_local.resolver import ACCOUNT_ID, REGION
from cirrusmq_local.template import Function

__all__ = ["FunctionRuntime", "HandlerLoadError", "LambdaContext"]

log = logging.getLogger(__name__)
_instances = itertools.count(1)
_ENVIRONMENT_PACKAGES = ("cirrusmq_api",)
"""Imported afresh by every environment: their module-level Powertools routers remember the
last resolver that included them (``router.api_resolver``), so two environments sharing
them would validate one request's body against another's (a concurrent request's)."""
_IMPORT_LOCK = threading.Lock()


class HandlerLoadError(RuntimeError):
    """The handler module could not be imported or has no such function."""


@dataclass
class LambdaContext:
    """The subset of the Python Lambda runtime's context object handlers use.

    ``memory_limit_in_mb`` is text, as in the real runtime (it comes from an environment
    variable there).
    """

    function_name: str
    memory_limit_in_mb: str
    invoked_function_arn: str
    timeout_seconds: int
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    function_version: str = "$LATEST"
    log_group_name: str = ""
    log_stream_name: str = "local"
    identity: Any = None
    client_context: Any = None
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        if not self._deadline:
            self._deadline = time.monotonic() + self.timeout_seconds
        if not self.log_group_name:
            self.log_group_name = f"/aws/lambda/{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's Timeout (never negative)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class FunctionRuntime:
    """One function: its handler is imported on first use (a cold start) from
    ``<CodeUri>/<module>.py`` under a module name unique to this function and stack.

    Like Lambda, an environment serves one invocation at a time: concurrent invocations
    each get an idle environment, or a new one (another import of the handler module, so
    per-request state kept on a module-level object, such as a Powertools resolver's
    ``context``, is never shared between two requests in flight).

    ``output`` receives every line the function writes (its logs and EMF metrics: what
    Lambda sends to CloudWatch Logs); None: they go to stdout.

    ``environment`` is the function's variables: the broker reads them (not the process's
    ``os.environ``, which every stack of the process shares) while the handler is imported and
    while it runs, so a second stack in the process never redirects this one's handlers.
    """

    def __init__(
        self,
        function: Function,
        physical_name: str,
        *,
        region: str = REGION,
        account_id: str = ACCOUNT_ID,
        environment: Mapping[str, str] | None = None,
        output: Callable[[str], None] | None = None,
    ) -> None:
        self.function = function
        self.output = output
        self.environment: Mapping[str, str] = dict(environment or {})
        self.physical_name = physical_name
        self.arn = f"arn:aws:lambda:{region}:{account_id}:function:{physical_name}"
        module_path, _, self._function_name = function.handler.rpartition(".")
        self.source = function.code_uri.joinpath(*module_path.split(".")).with_suffix(".py")
        self.module_name = f"_cirrusmq_fn_{function.logical_id}_{next(_instances)}"
        self._idle: list[Callable[[Any, Any], Any]] = []
        self._modules: list[str] = []
        self._lock = threading.Lock()

    @property
    def logical_id(self) -> str:
        """The function's logical id in the template."""
        return self.function.logical_id

    def _load(self) -> Callable[[Any, Any], Any]:
        """An idle environment's handler, or a new environment's (a cold start)."""
        with self._lock, function_environment(self.environment):
            if self._idle:
                return self._idle.pop()
            name = (
                self.module_name
                if not self._modules
                else f"{self.module_name}_{len(self._modules)}"
            )
            module = self._import(self.source, name)
            handler = getattr(module, self._function_name, None)
            if not callable(handler):
                sys.modules.pop(name, None)
                raise HandlerLoadError(
                    f"{self.logical_id}: {self.source} has no function {self._function_name!r}"
                )
            self._modules.append(name)
            return handler

    def _release(self, handler: Callable[[Any, Any], Any]) -> None:
        with self._lock:
            if self._modules:  # not unloaded meanwhile
                self._idle.append(handler)

    def _import(self, source: Path, name: str) -> ModuleType:
        if not source.is_file():
            raise HandlerLoadError(f"{self.logical_id}: handler file {source} does not exist")
        spec = importlib.util.spec_from_file_location(name, source)
        if spec is None or spec.loader is None:
            raise HandlerLoadError(f"{self.logical_id}: cannot import {source}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            with _IMPORT_LOCK:  # this environment's own copy of the API package
                for loaded in [m for m in sys.modules if m.split(".")[0] in _ENVIRONMENT_PACKAGES]:
                    del sys.modules[loaded]
                spec.loader.exec_module(module)
        except BaseException as exc:
            sys.modules.pop(name, None)
            raise HandlerLoadError(
                f"{self.logical_id}: importing {source} failed: {exc!r}"
            ) from exc
        return module

    def preload(self) -> None:
        """Import the handler now instead of on the first invocation."""
        self._release(self._load())

    def invoke(self, event: Any) -> Any:
        """Call the handler with ``event`` as Lambda would: the event and the result pass
        through JSON (a result that is not JSON-serialisable raises ``TypeError``)."""
        handler = self._load()
        context = LambdaContext(
            function_name=self.physical_name,
            memory_limit_in_mb=str(self.function.memory_size),
            invoked_function_arn=self.arn,
            timeout_seconds=self.function.timeout,
        )
        started = time.monotonic()
        try:
            with function_environment(self.environment), self._captured():
                result = handler(json.loads(json.dumps(event)), context)
        finally:
            self._release(handler)
        elapsed = time.monotonic() - started
        if elapsed > self.function.timeout:
            log.warning(
                "%s ran %.1f s, longer than its Timeout of %d s (Lambda would have killed it)",
                self.logical_id,
                elapsed,
                self.function.timeout,
            )
        return json.loads(json.dumps(result))

    def _captured(self) -> Any:
        return capture(self.output) if self.output is not None else contextlib.nullcontext()

    def unload(self) -> None:
        """Forget the imported module so a new stack gets a fresh cold start."""
        with self._lock:
            self._idle.clear()
            for name in self._modules:
                sys.modules.pop(name, None)
            self._modules.clear()
