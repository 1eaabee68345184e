"""YAML loading for CloudFormation/SAM templates (short-form intrinsic function tags)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

__all__ = ["CloudFormationLoader", "load_yaml"]


class CloudFormationLoader(yaml.SafeLoader):
    """SafeLoader that turns ``!Ref x`` / ``!GetAtt a.b`` / ``!Sub ...`` into long-form dicts.

    Dates are left as strings, as CloudFormation does (``AWSTemplateFormatVersion: 2010-09-09``).
    """


# CloudFormation keeps "2010-09-09" a string: drop the timestamp implicit resolver.
CloudFormationLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_node(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    raise yaml.constructor.ConstructorError(
        None, None, f"unexpected node {node!r}", node.start_mark
    )


def _construct_intrinsic(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> Any:
    value = _construct_node(loader, node)
    if tag_suffix == "Ref":
        return {"Ref": value}
    if tag_suffix == "Condition":
        return {"Condition": value}
    if tag_suffix == "GetAtt" and isinstance(value, str):
        resource, _, attribute = value.partition(".")
        if not attribute:
            raise yaml.constructor.ConstructorError(
                None, None, f"!GetAtt {value!r} needs the form Resource.Attribute", node.start_mark
            )
        return {"Fn::GetAtt": [resource, attribute]}
    return {f"Fn::{tag_suffix}": value}


CloudFormationLoader.add_multi_constructor("!", _construct_intrinsic)


def load_yaml(path: str | Path) -> Any:
    """Parse a CloudFormation YAML file into plain Python data (long-form intrinsics)."""
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=CloudFormationLoader)  # noqa: S506 - SafeLoader subclass
