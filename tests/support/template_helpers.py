"""Small readers over synthesized CloudFormation templates."""

from __future__ import annotations

import json
from typing import Any

from cdk_llm_serving.testing import mask_asset_hashes

__all__ = [
    "actions_of",
    "flatten",
    "manifest_objects",
    "mask_asset_hashes",
    "only_resource",
    "policy_statements",
    "resources_of_type",
]


def resources_of_type(template: dict, resource_type: str) -> dict[str, dict]:
    return {
        key: value for key, value in template["Resources"].items() if value["Type"] == resource_type
    }


def only_resource(template: dict, resource_type: str) -> tuple[str, dict]:
    found = resources_of_type(template, resource_type)
    assert len(found) == 1, f"expected one {resource_type}, found {sorted(found)}"
    return next(iter(found.items()))


def policy_statements(template: dict, role_logical_id: str) -> list[dict]:
    """Every statement of the inline and customer managed policies attached to one role."""
    statements: list[dict] = []
    policies = {
        **resources_of_type(template, "AWS::IAM::Policy"),
        **resources_of_type(template, "AWS::IAM::ManagedPolicy"),
    }
    for policy in policies.values():
        roles = policy["Properties"].get("Roles", [])
        if {"Ref": role_logical_id} in roles:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def actions_of(statement: dict) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def flatten(value: Any, placeholder: str = "TOKEN") -> str:
    """A string property as text: parts of an ``Fn::Join`` that resolve at deploy time become ``placeholder``."""
    if isinstance(value, str):
        return value
    return "".join(part if isinstance(part, str) else placeholder for part in value["Fn::Join"][1])


def manifest_objects(template: dict, key_part: str) -> list[dict]:
    """Kubernetes objects of the manifest resources whose logical id contains ``key_part``."""
    found: list[dict] = []
    for key, resource in resources_of_type(
        template, "Custom::AWSCDK-EKS-KubernetesResource"
    ).items():
        if key_part in key:
            found += json.loads(flatten(resource["Properties"]["Manifest"], "deploy-time-value"))
    return found
