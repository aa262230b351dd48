"""A Lambda function's role that may write only to the function's own log group."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from .nag import acknowledge_wildcard_resources


def role_with_own_logs(
    scope: Construct,
    *,
    role_id: str,
    logs_id: str,
    description: str,
    statements: Sequence[iam.PolicyStatement] = (),
    logs_removal: RemovalPolicy = RemovalPolicy.RETAIN,
) -> tuple[iam.Role, logs.LogGroup]:
    """A role Lambda assumes with ``statements``, and a log group (one month) only it writes.

    Pass the log group as the function's ``log_group`` so Lambda writes there (and not to
    a group it would create with the wildcard grants of ``AWSLambdaBasicExecutionRole``).
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
    for statement in statements:
        role.add_to_policy(statement)
    streams = f"{log_group.log_group_arn}:*"
    role.add_to_policy(
        iam.PolicyStatement(
            actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[streams]
        )
    )
    acknowledge_wildcard_resources(
        role, [streams], "Log streams of the function's own log group; Lambda names them."
    )
    return role, log_group
