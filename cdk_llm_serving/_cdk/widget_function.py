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

from .nag import acknowledge_wildcard_resources


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
    for statement in spec.statements:
        role.add_to_policy(statement)
    log_streams = f"{log_group.log_group_arn}:*"
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[log_streams]
        )
    )
    acknowledge_wildcard_resources(
        role,
        [*spec.wildcards, log_streams],
        " ".join(
            filter(
                None,
                [
                    spec.wildcard_reason,
                    "Log streams of the widget function's own log group; their names are made by Lambda.",
                ],
            )
        ),
    )
    return lambda_.Function(
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
