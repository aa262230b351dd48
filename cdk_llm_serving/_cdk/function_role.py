"""A Lambda function's role that may write only to the function's own log group."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct, IConstruct

from .nag import BoundWildcard, acknowledge, acknowledge_statements

_LOG_WRITES = ("logs:CreateLogStream", "logs:PutLogEvents")


def role_with_own_logs(
    scope: Construct,
    *,
    role_id: str,
    logs_id: str,
    description: str,
    statements: Sequence[iam.PolicyStatement] = (),
    logs_removal: RemovalPolicy = RemovalPolicy.RETAIN,
    wildcards: Sequence[str] = (),
    wildcard_reason: str = "",
) -> tuple[iam.Role, logs.LogGroup]:
    """A role Lambda assumes with ``statements``, and a log group (one month) only it writes.

    Pass the log group as the function's ``log_group`` so Lambda writes there (and not to
    a group it would create with the wildcard grants of ``AWSLambdaBasicExecutionRole``).
    ``wildcards``: resources among ``statements`` that must stay wildcards, and why.
    """
    log_group = logs.LogGroup(
        scope, logs_id, retention=logs.RetentionDays.ONE_MONTH, removal_policy=logs_removal
    )
    role = iam.Role(
        scope,
        role_id,
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description=description,
    )
    streams = f"{log_group.log_group_arn}:*"
    own_logs = iam.PolicyStatement(actions=list(_LOG_WRITES), resources=[streams])
    # A named policy under the role (the function, which depends on its role, waits for it
    # too); only its own wildcards are acknowledged, on it alone.
    policy = iam.ManagedPolicy(
        role,
        "Policy",
        roles=[role],
        description=f"{description}: its grants and its own log group",
        statements=[*statements, own_logs],
    )
    acknowledge(
        log_group,
        "HIPAA.Security-CloudWatchLogGroupEncrypted",
        "The function's own logs (its messages and errors, no request content); "
        "CloudWatch Logs encrypts them at rest with its own keys.",
    )
    bound = [
        BoundWildcard(
            tuple(statement.actions),
            tuple(r for r in statement.resources if r in wildcards),
            wildcard_reason,
        )
        for statement in statements
        if set(statement.resources) & set(wildcards)
    ]
    own_reason = "Log streams of the function's own log group; Lambda names them."
    bound.append(BoundWildcard(_LOG_WRITES, (streams,), own_reason))
    acknowledge_statements(policy, bound)
    return role, log_group


def acknowledge_lambda_hipaa(
    function: IConstruct, *, concurrency: str, dead_letter: str, outside_vpc: str
) -> None:
    """HIPAA.Security's Lambda findings for one function, each with the caller's reason."""
    for rule, reason in (
        ("LambdaConcurrency", concurrency),
        ("LambdaDLQ", dead_letter),
        ("LambdaInsideVPC", outside_vpc),
    ):
        acknowledge(function, f"HIPAA.Security-{rule}", reason)
