"""Acknowledging cdk-nag findings that a construct's design makes unavoidable, with reasons."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def _render(value: Any) -> str:
    """Render a resolved CloudFormation value the way cdk-nag names it in a finding."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(_render(part) for part in parts)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{resource}.{attribute}>"
    return str(value)


def finding_resource(scope: IConstruct, value: str) -> str:
    """``Resource::…`` as cdk-nag writes it for ``value`` (tokens become ``<Name>``)."""
    return _render(Stack.of(scope).resolve(value))


def acknowledge_wildcard_resources(scope: IConstruct, resources: list[str], reason: str) -> None:
    """Acknowledge ``AwsSolutions-IAM5`` for exactly these wildcard resources, nothing broader."""
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(id=f"AwsSolutions-IAM5[Resource::{finding_resource(scope, resource)}]", reason=reason)
            for resource in resources
        )
    )


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))
