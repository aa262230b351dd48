"""The function behind CloudWatch custom widgets: its own role, its own log group, nothing more."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from .nag import acknowledge, acknowledge_wildcard_resources


@dataclass(frozen=True)
class WidgetFunctionSpec:
    """What differs between widget functions: code, what they read, and their words."""

    code: Path
    description: str
    role_description: str
    statements: Sequence[iam.PolicyStatement]
    environment: Mapping[str, str]
    #: Wildcard resources among ``statements`` and why they cannot be narrower.
    wildcards: Sequence[str] = ()
    wildcard_reason: str = ""


def widget_function(scope: Construct, prefix: str, spec: WidgetFunctionSpec) -> lambda_.Function:
    """``<prefix>Logs``, ``<prefix>Role`` and the function ``<prefix>`` under ``scope``."""
    log_group = logs.LogGroup(
        scope,
        f"{prefix}Logs",
        retention=logs.RetentionDays.ONE_MONTH,
        removal_policy=RemovalPolicy.RETAIN,
    )
    role = iam.Role(
        scope,
        f"{prefix}Role",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=spec.role_description,
    )
    log_streams = f"{log_group.log_group_arn}:*"
    # Its own named policy: the wildcards are acknowledged on this policy alone, so one
    # added to the role elsewhere is still reported.
    policy = iam.ManagedPolicy(
        scope,
        f"{prefix}Policy",
        roles=[role],
        description=f"{spec.role_description}: what it reads, and its own logs",
        statements=[
            *spec.statements,
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_streams]
            ),
        ],
    )
    own_logs = "Log streams of the widget function's own log group; their names are made by Lambda."
    acknowledge_wildcard_resources(
        policy,
        [*spec.wildcards, log_streams],
        " ".join(filter(None, [spec.wildcard_reason, own_logs])),
    )
    function = lambda_.Function(
        scope,
        prefix,
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=lambda_.Code.from_asset(str(spec.code), exclude=["__pycache__", "*.pyc"]),
        role=role,
        log_group=log_group,
        timeout=Duration.seconds(30),
        memory_size=256,
        environment=dict(spec.environment),
        description=spec.description,
    )
    _acknowledge_hipaa(log_group, function)
    return function


def _acknowledge_hipaa(log_group: logs.LogGroup, function: lambda_.Function) -> None:
    """HIPAA.Security findings a dashboard widget's function cannot act on, with reasons."""
    acknowledge(
        log_group,
        "HIPAA.Security-CloudWatchLogGroupEncrypted",
        "The widget's logs hold chart queries and errors, no request content; "
        "CloudWatch Logs encrypts them at rest with its own keys.",
    )
    for rule, reason in (
        ("LambdaConcurrency", "Invoked only by the dashboard's custom widgets, on view."),
        ("LambdaDLQ", "Invoked synchronously by CloudWatch dashboards: no event to dead-letter."),
        ("LambdaInsideVPC", "Calls only public, SigV4-signed AWS query APIs."),
    ):
        acknowledge(function, f"HIPAA.Security-{rule}", reason)
