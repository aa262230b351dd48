"""Acknowledging cdk-nag findings that a construct's design makes unavoidable, with reasons."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import jsii
from aws_cdk import Acknowledgment, Aspects, IAspect, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import IConstruct

from .validation import is_unresolved


def _render(value: Any) -> str:
    """Render a resolved CloudFormation value the way cdk-nag names it in a finding."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_render(part) for part in parts)
    if isinstance(value, dict) and isinstance(value.get("Fn::Sub"), str):
        return re.sub(r"\$\{([^}]+)\}", r"<\1>", value["Fn::Sub"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        resource, attribute = value["Fn::GetAtt"]
        return f"<{resource}.{attribute}>"
    return str(value)


def finding_resource(scope: IConstruct, value: str) -> str:
    """``Resource::…`` as cdk-nag writes it for ``value`` (tokens become ``<Name>``)."""
    if not is_unresolved(value):
        return value  # a literal resolves to itself: no round trip to the jsii kernel
    return _render(Stack.of(scope).resolve(value))


def acknowledge_wildcard_resources(scope: IConstruct, resources: list[str], reason: str) -> None:
    """Acknowledge ``AwsSolutions-IAM5`` for exactly these wildcard resources, nothing broader."""
    acknowledge_wildcards(scope, dict.fromkeys(resources, reason))


def acknowledge_wildcards(
    scope: IConstruct, reasons: Mapping[str, str], *, stack: Stack | None = None
) -> None:
    """``AwsSolutions-IAM5`` for each wildcard resource of ``reasons``, with its own reason.

    One acknowledgment call for all of them, and one ``resolve`` for all their tokens: each
    jsii round trip costs about 0.3 ms of CPU, and a pool endpoint acknowledges four.
    """
    resources = list(reasons)
    # All of them in one ``resolve`` (a literal resolves to itself), not one
    # ``Token.is_unresolved`` each to find the tokens first.
    # ``stack``: the stack of ``scope``, when the caller holds it already (else asked).
    resolved = dict(zip(resources, (stack or Stack.of(scope)).resolve(resources), strict=True))
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::{_render(resolved.get(resource, resource))}]",
                reason=reasons[resource],
            )
            for resource in resources
        )
    )


def acknowledge(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=rule, reason=reason))


def _finding_text(value: Any) -> str:
    """As cdk-nag prints a resolved value in a finding id: intrinsics it cannot flatten stay JSON."""
    if isinstance(value, str) or (
        isinstance(value, dict) and ({"Ref", "Fn::Join", "Fn::GetAtt", "Fn::Sub"} & set(value))
    ):
        return _render(value)
    return json.dumps(value, separators=(",", ":"))


#: HIPAA.Security rules on a Lambda function's own settings (concurrency, DLQ, VPC).
_HIPAA_LAMBDA_RULES = ("LambdaConcurrency", "LambdaDLQ", "LambdaInsideVPC")


@jsii.implements(IAspect)
class AcknowledgeCdkInternals:
    """Acknowledges cdk-nag findings on resources that aws-cdk-lib itself generates.

    Applied to a subtree (a kubectl provider, a bucket-deployment handler, a controller's
    service-account role), it acknowledges, with ``reason``, each finding the rules would
    raise there: managed policies (IAM4), wildcard actions and resources (IAM5) and the
    Lambda runtime (L1); and, for the HIPAA.Security pack, the inline policy, the Lambda
    function's settings and its log group's key, which aws-cdk-lib decides, not us.
    It runs as an aspect, after every statement has been added.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def visit(self, node: IConstruct) -> None:
        # Stack.of is a jsii round trip: asked only of the two kinds of node that resolve.
        ids: list[str] = []
        if isinstance(node, iam.CfnRole):
            for arn in Stack.of(node).resolve(node.managed_policy_arns) or []:
                ids.append(f"AwsSolutions-IAM4[Policy::{_finding_text(arn)}]")
        elif isinstance(node, iam.CfnPolicy):
            document = Stack.of(node).resolve(node.policy_document) or {}
            ids.append("HIPAA.Security-IAMNoInlinePolicy")
            for statement in document.get("Statement", []):
                for action in _as_list(statement.get("Action")):
                    if "*" in action:
                        ids.append(f"AwsSolutions-IAM5[Action::{action}]")
                for resource in _as_list(statement.get("Resource")):
                    text = _finding_text(resource)
                    if "*" in text:
                        ids.append(f"AwsSolutions-IAM5[Resource::{text}]")
        elif isinstance(node, lambda_.CfnFunction):
            ids.append("AwsSolutions-L1")
            ids.extend(f"HIPAA.Security-{rule}" for rule in _HIPAA_LAMBDA_RULES)
        elif isinstance(node, logs.CfnLogGroup):
            ids.append("HIPAA.Security-CloudWatchLogGroupEncrypted")
        if ids:
            Validations.of(node).acknowledge(
                *(Acknowledgment(id=i, reason=self.reason) for i in dict.fromkeys(ids))
            )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def acknowledge_cdk_internals(scope: IConstruct, reason: str) -> None:
    Aspects.of(scope).add(AcknowledgeCdkInternals(reason))
