"""Resolve intrinsic functions (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``, ...) to local values.

Physical names are deterministic: table ``cirrusmq-<LogicalId>``, function
``cirrusmq-<LogicalId>``, bucket ``cirrusmq-<logicalid>-<stack name>`` (lower-case), KMS key
``alias/cirrusmq-<LogicalId>`` (an alias of the key made locally), unless
the template names the resource itself (``TableName``, ``BucketName``, ``FunctionName``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import secrets
import string
from collections.abc import Mapping
from typing import Any

from cirrusmq_local.template import (
    BUCKET_TYPE,
    DIRECTORY_BUCKET_TYPE,
    FUNCTION_TYPE,
    KMS_KEY_TYPE,
    TABLE_TYPE,
    Function,
    Template,
    TemplateError,
)

__all__ = [
    "ACCOUNT_ID",
    "NAME_PREFIX",
    "PARTITION",
    "REGION",
    "Resolver",
    "generate_secret",
    "resolve_parameters",
]

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"
PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"
NAME_PREFIX = "cirrusmq"
SECRET_LENGTH = 48

_NO_VALUE = object()
_SUB_PATTERN = re.compile(r"\$\{([^}]*)\}")
_SECRET_ALPHABET = string.ascii_letters + string.digits


def generate_secret(length: int = SECRET_LENGTH) -> str:
    """A random alphanumeric secret of ``length`` characters."""
    return "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(length))


def resolve_parameters(template: Template, overrides: Mapping[str, Any] | None = None) -> dict:
    """Parameter values as text: override, else ``Default``.

    A ``NoEcho`` String parameter without a default (a secret such as
    ``ReceiptSigningSecret``) gets a fresh random value of max(48, MinLength) characters.
    Every value is checked against the parameter's constraints.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(template.parameters))
    if unknown:
        raise TemplateError(f"unknown template parameter(s): {', '.join(unknown)}")
    values: dict[str, str] = {}
    for name, parameter in template.parameters.items():
        if name in overrides:
            raw = overrides[name]
            value = ",".join(map(str, raw)) if isinstance(raw, list | tuple) else str(raw)
        elif parameter.default is not None:
            value = parameter.default
        elif parameter.no_echo and parameter.type == "String":
            value = generate_secret(max(SECRET_LENGTH, parameter.min_length or 0))
        else:
            raise TemplateError(f"parameter {name} has no Default: pass a value for it")
        parameter.validate(value)
        values[name] = value
    return values


def _bucket_safe(name: str) -> str:
    name = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    return name[:63].rstrip("-.")


class Resolver:
    """Evaluates intrinsic functions against local physical names and parameter values."""

    def __init__(
        self,
        template: Template,
        parameters: Mapping[str, str],
        *,
        stack_name: str = "local",
        region: str = REGION,
        account_id: str = ACCOUNT_ID,
    ) -> None:
        self.template = template
        self.parameters = dict(parameters)
        self.stack_name = stack_name
        self.region = region
        self.account_id = account_id
        self._names: dict[str, str] = {}
        self._resolving: set[str] = set()

    # ------------------------------------------------------------------ names
    def physical_name(self, logical_id: str) -> str:
        """The local physical name (``Ref`` value) of a resource."""
        if logical_id in self._names:
            return self._names[logical_id]
        resource = self.template.resources.get(logical_id)
        if resource is None:
            raise TemplateError(f"no resource named {logical_id}")
        if logical_id in self._resolving:
            raise TemplateError(f"circular reference through {logical_id}")
        self._resolving.add(logical_id)
        try:
            name = self._compute_name(logical_id, resource)
        finally:
            self._resolving.discard(logical_id)
        self._names[logical_id] = name
        return name

    def _compute_name(self, logical_id: str, resource: Mapping[str, Any]) -> str:
        kind = resource.get("Type")
        props = resource.get("Properties") or {}
        explicit_key = {TABLE_TYPE: "TableName", BUCKET_TYPE: "BucketName"}.get(
            kind, "FunctionName" if kind == FUNCTION_TYPE else None
        )
        if explicit_key and props.get(explicit_key) is not None:
            return self.text(props[explicit_key])
        if kind in (BUCKET_TYPE, DIRECTORY_BUCKET_TYPE):  # no --x-s3 name: an ordinary moto bucket
            return _bucket_safe(f"{NAME_PREFIX}-{logical_id}-{self.stack_name}")
        if kind == KMS_KEY_TYPE:  # the local key gets this alias; KMS accepts it as a KeyId
            return f"alias/{NAME_PREFIX}-{logical_id}"
        return f"{NAME_PREFIX}-{logical_id}"

    # ------------------------------------------------------------- evaluation
    def resolve(self, value: Any) -> Any:
        """Return ``value`` with every intrinsic function evaluated."""
        result = self._resolve(value)
        return None if result is _NO_VALUE else result

    def text(self, value: Any) -> str:
        """Resolve ``value`` and give CloudFormation's text form of the resulting scalar."""
        result = self.resolve(value)
        if isinstance(result, bool):
            return "true" if result else "false"
        if isinstance(result, dict | list):
            raise TemplateError(f"expected a scalar, got {result!r}")
        return "" if result is None else str(result)

    def environment(self, function: Function) -> dict[str, str]:
        """A function's environment variables, resolved to text."""
        return {key: self.text(value) for key, value in function.environment.items()}

    def function(self, function: Function) -> Function:
        """The function with its MemorySize resolved (it may name a parameter)."""
        memory = self.text(function.memory_size)
        try:
            return dataclasses.replace(function, memory_size=int(memory))
        except ValueError:
            raise TemplateError(
                f"{function.logical_id} MemorySize must be an integer, got {memory!r}"
            ) from None

    def condition(self, name: str) -> bool:
        """Evaluate a named entry of the template's ``Conditions``."""
        if name not in self.template.conditions:
            raise TemplateError(f"no condition named {name}")
        return bool(self.resolve(self.template.conditions[name]))

    def _resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            items = (self._resolve(item) for item in value)
            return [item for item in items if item is not _NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            key, arg = next(iter(value.items()))
            if key == "Ref":
                return self._ref(arg)
            if key == "Condition" and isinstance(arg, str):
                return self.condition(arg)
            if key.startswith("Fn::"):
                return self._function(key[4:], arg)
        resolved = {key: self._resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not _NO_VALUE}

    def _ref(self, name: Any) -> Any:
        name = self._resolve(name)
        pseudo = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::StackName": self.stack_name,
            "AWS::StackId": f"arn:{PARTITION}:cloudformation:{self.region}:{self.account_id}:"
            f"stack/{self.stack_name}/00000000-0000-0000-0000-000000000000",
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": URL_SUFFIX,
            "AWS::NotificationARNs": [],
        }
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in pseudo:
            return pseudo[name]
        if name in self.parameters:
            value = self.parameters[name]
            kind = self.template.parameters[name].type
            if kind.startswith("List<") or kind == "CommaDelimitedList":
                return value.split(",") if value else []
            return value
        if name in self.template.resources:
            return self.physical_name(name)
        raise TemplateError(f"!Ref {name}: no such parameter or resource")

    def _get_att(self, logical_id: str, attribute: str) -> str:
        kind = self.template.resource_type(logical_id)
        if kind is None:
            raise TemplateError(f"!GetAtt {logical_id}.{attribute}: no such resource")
        name = self.physical_name(logical_id)
        arn_prefix = f"arn:{PARTITION}"
        if kind == BUCKET_TYPE:
            attributes = {
                "Arn": f"{arn_prefix}:s3:::{name}",
                "DomainName": f"{name}.s3.{URL_SUFFIX}",
                "RegionalDomainName": f"{name}.s3.{self.region}.{URL_SUFFIX}",
                "WebsiteURL": f"http://{name}.s3-website-{self.region}.{URL_SUFFIX}",
            }
        elif kind == DIRECTORY_BUCKET_TYPE:
            attributes = {
                "Arn": f"{arn_prefix}:s3express:{self.region}:{self.account_id}:bucket/{name}"
            }
        elif kind == TABLE_TYPE:
            table_arn = f"{arn_prefix}:dynamodb:{self.region}:{self.account_id}:table/{name}"
            attributes = {
                "Arn": table_arn,
                "StreamArn": f"{table_arn}/stream/1970-01-01T00:00:00.000",
            }
        elif kind == FUNCTION_TYPE:
            attributes = {
                "Arn": f"{arn_prefix}:lambda:{self.region}:{self.account_id}:function:{name}"
            }
        elif kind == KMS_KEY_TYPE:
            attributes = {"Arn": f"{arn_prefix}:kms:{self.region}:{self.account_id}:{name}"}
        else:
            attributes = {}
        if attribute not in attributes:
            raise TemplateError(f"!GetAtt {logical_id}.{attribute} is not supported locally")
        return attributes[attribute]

    def _function(self, name: str, arg: Any) -> Any:
        handler = getattr(self, f"_fn_{name.lower()}", None)
        if handler is None:
            raise TemplateError(f"Fn::{name} is not supported by the local stack")
        return handler(arg)

    def _fn_getatt(self, arg: Any) -> Any:
        arg = self._resolve(arg)
        if isinstance(arg, str):
            arg = arg.split(".", 1)
        if not isinstance(arg, list) or len(arg) != 2:
            raise TemplateError(f"Fn::GetAtt needs [Resource, Attribute], got {arg!r}")
        return self._get_att(str(arg[0]), str(arg[1]))

    def _fn_sub(self, arg: Any) -> str:
        if isinstance(arg, list):
            if len(arg) != 2 or not isinstance(arg[1], dict):
                raise TemplateError("Fn::Sub needs [template, {variables}]")
            template, variables = arg[0], {k: self._resolve(v) for k, v in arg[1].items()}
        else:
            template, variables = arg, {}
        if not isinstance(template, str):
            raise TemplateError("Fn::Sub template must be text")

        def substitute(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("!"):
                return "${" + expression[1:] + "}"
            if expression in variables:
                value = variables[expression]
            elif "." in expression and expression.split(".", 1)[0] in self.template.resources:
                value = self._get_att(*expression.split(".", 1))
            else:
                value = self._ref(expression)
            return self.text(value)

        return _SUB_PATTERN.sub(substitute, template)

    def _fn_join(self, arg: Any) -> str:
        arg = self._resolve(arg)
        if not isinstance(arg, list) or len(arg) != 2 or not isinstance(arg[1], list):
            raise TemplateError("Fn::Join needs [delimiter, [values]]")
        return str(arg[0]).join(self.text(item) for item in arg[1])

    def _fn_select(self, arg: Any) -> Any:
        arg = self._resolve(arg)
        if not isinstance(arg, list) or len(arg) != 2 or not isinstance(arg[1], list):
            raise TemplateError("Fn::Select needs [index, [values]]")
        return arg[1][int(arg[0])]

    def _fn_split(self, arg: Any) -> list[str]:
        arg = self._resolve(arg)
        if not isinstance(arg, list) or len(arg) != 2:
            raise TemplateError("Fn::Split needs [delimiter, text]")
        return str(arg[1]).split(str(arg[0]))

    def _fn_if(self, arg: Any) -> Any:
        if not isinstance(arg, list) or len(arg) != 3:
            raise TemplateError("Fn::If needs [condition, value if true, value if false]")
        return self._resolve(arg[1] if self.condition(arg[0]) else arg[2])

    def _fn_equals(self, arg: Any) -> bool:
        arg = self._resolve(arg)
        if not isinstance(arg, list) or len(arg) != 2:
            raise TemplateError("Fn::Equals needs two values")
        return self.text(arg[0]) == self.text(arg[1])

    def _fn_not(self, arg: Any) -> bool:
        return not self._truthy(arg[0] if isinstance(arg, list) else arg)

    def _fn_and(self, arg: Any) -> bool:
        return all(self._truthy(item) for item in arg)

    def _fn_or(self, arg: Any) -> bool:
        return any(self._truthy(item) for item in arg)

    def _truthy(self, value: Any) -> bool:
        result = self._resolve(value)
        return result if isinstance(result, bool) else str(result).lower() == "true"

    def _fn_findinmap(self, arg: Any) -> Any:
        arg = self._resolve(arg)
        try:
            name, first, second = arg
            return self.template.mappings[name][first][second]
        except (KeyError, TypeError, ValueError):
            raise TemplateError(f"Fn::FindInMap {arg!r}: no such entry") from None

    def _fn_base64(self, arg: Any) -> str:
        return base64.b64encode(self.text(arg).encode()).decode()

    def _fn_getazs(self, arg: Any) -> list[str]:
        return [f"{self.region}{zone}" for zone in "abc"]

    def _fn_tojsonstring(self, arg: Any) -> str:
        return json.dumps(self._resolve(arg), separators=(",", ":"))
