"""The function behind CloudWatch custom widgets: its own role, its own log group, nothing more."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from .function_role import acknowledge_lambda_hipaa, role_with_own_logs


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
    role, log_group = role_with_own_logs(
        scope,
        role_id=f"{prefix}Role",
        logs_id=f"{prefix}Logs",
        description=spec.role_description,
        statements=spec.statements,
        wildcards=spec.wildcards,
        wildcard_reason=spec.wildcard_reason,
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
    acknowledge_lambda_hipaa(
        function,
        concurrency="Invoked only by the dashboard's custom widgets, on view.",
        dead_letter="Invoked synchronously by CloudWatch dashboards: no event to dead-letter.",
        outside_vpc="Calls only public, SigV4-signed AWS query APIs.",
    )
    return function
